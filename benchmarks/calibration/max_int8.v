// One lane of max pooling per window element (process/window.cpp.j2): sum[u] = x > sum[u] ? x : sum[u]
// (int8 values); one lane of an element-wise MAXIMUM (process/extremum.cpp.j2) is the same compare and select.
module max_int8 (
  input clk,
  input signed [7:0] x,
  input signed [7:0] running,
  (* io_register *) output reg signed [7:0] maximum
);
  (* io_register *) reg signed [7:0] x_q, running_q;
  always @(posedge clk) begin
    x_q <= x;
    running_q <= running;
    maximum <= x_q > running_q ? x_q : running_q;
  end
endmodule
