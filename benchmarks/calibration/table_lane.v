// One lane of a table process (process/table.cpp.j2): result = table[x + 128], a 256-entry int8 ROM with
// constant contents, here a deterministic pseudo-random table (a hash of the index and SEED), built in logic.
module table_lane #(parameter SEED = 32'h6D696E67) (
  input clk,
  input signed [7:0] x,
  (* io_register *) output reg signed [7:0] y
);
  function [7:0] entry(input integer index);
    reg [31:0] h;
    begin
      h = index * 32'h9E3779B9 + SEED;
      h = h ^ (h >> 15);
      h = h * 32'h85EBCA6B;
      h = h ^ (h >> 13);
      entry = h[7:0] ^ h[23:16];
    end
  endfunction
  wire [2047:0] contents;
  genvar i;
  generate
    for (i = 0; i < 256; i = i + 1) begin : rom
      assign contents[i * 8 +: 8] = entry(i);
    end
  endgenerate
  (* io_register *) reg signed [7:0] x_q;
  wire [7:0] address = {~x_q[7], x_q[6:0]};  // x + 128
  always @(posedge clk) begin
    x_q <= x;
    y <= contents[address * 8 +: 8];
  end
endmodule
