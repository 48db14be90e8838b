// One lane of an element-wise MINIMUM (process/extremum.cpp.j2): result = a < b ? a : b (int8 values).
module min_int8 (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  (* io_register *) output reg signed [7:0] minimum
);
  (* io_register *) reg signed [7:0] a_q, b_q;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    minimum <= a_q < b_q ? a_q : b_q;
  end
endmodule
