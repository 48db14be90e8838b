// A control counter of the emitted loops (ming::uint_for<LIMIT>, e.g. process/window.cpp.j2):
//   if (enable) { if (count != LIMIT) count++; else count = 0; }
// WIDTH bits; LIMIT below 2^WIDTH - 1 by default (at all ones the wrap would be free).
module counter #(parameter WIDTH = 8, parameter LIMIT = (WIDTH == 1) ? 1 : (1 << WIDTH) - 2) (
  input clk,
  input enable,
  output reg [WIDTH - 1:0] count
);
  (* io_register *) reg enable_q;
  always @(posedge clk) begin
    enable_q <= enable;
    if (enable_q) count <= count == LIMIT ? {WIDTH{1'b0}} : count + 1'b1;
  end
endmodule
