// An int8 INPUTS:1 multiplexer: an output lane of a channel permutation (process/permute.cpp.j2,
// result.lane[l] = pixel[1 - half][token][l]) choosing among INPUTS registers.
module mux_int8 #(parameter INPUTS = 4) (
  input clk,
  input [INPUTS * 8 - 1:0] values,
  input [$clog2(INPUTS) - 1:0] select,
  (* io_register *) output reg [7:0] y
);
  (* io_register *) reg [INPUTS * 8 - 1:0] values_q;
  (* io_register *) reg [$clog2(INPUTS) - 1:0] select_q;
  always @(posedge clk) begin
    values_q <= values;
    select_q <= select;
    y <= values_q[select_q * 8 +: 8];
  end
endmodule
