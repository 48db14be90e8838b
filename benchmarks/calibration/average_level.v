// ming::average_level (ming_numerics.h, onnxruntime's QLinearAveragePool over windows, the output stage of
// numerics.window_average_level): the requantizer of one lane, from the chain's final sum of a window of divisor
// row r (WindowAverageConstants), at the C++'s widths for a 3 x 3 window (ming::average_level<9>, the *_BITS below):
//   u = clamp(sum, low, high) - low;  k = clamp(((u >> drop) * ratio + offset) >> 24, 0, LAST);
//   y = k - (u < T'[k]) + QMIN,  T' = thresholds[r]
// The row's low, high, drop, ratio and offset are per-row ROM values (a window's count of unpadded elements picks
// the row): inputs here. Widths of a 3 x 3 window: sum, low and high 38 bits signed (below the bound 2 * 9 * 2^32
// < 2^37), u below 2^38 (high - low < 2 * bound); numerics._estimate takes drop = bit_length(high - low) - 16
// (at least 0, at most 22: 5 bits), so u >> drop < 2^16 is taken to 16 bits, a barrel shifter; ratio < 2^26
// (AVERAGE_RATIO_LIMIT) unsigned, offset 41 bits signed (|offset| < 2^40): one 16 x 26-bit unsigned product (42
// bits) on one DSP48E2, the sum with offset 44 bits signed (one more than the product's signed 43), its bits
// from 24 up clamped to 0 .. LAST (8 bits). LAST (qmax - qmin, 255) and QMIN are constants of the process.
// The thresholds T' (38 bits unsigned: 0 .. 2 * bound) are a ROM of 256 entries per row, not part of this model:
// as a pipelined HLS datapath reads a ROM, the address k goes to the ROM's address register (the registered
// output `address` here, the io register standing for it) and the entry comes back the next cycle (`threshold`,
// an input read that cycle, unregistered: the ROM's own output), while u and k wait one cycle in the datapath's
// own pipeline registers (46 flip-flops, the ff of the figure; a module of their own until after synthesis, or
// yosys would merge k's with the address register, which on the device is the ROM's, a block RAM's own). The
// compare u < T', the subtraction and QMIN give the int8 output, registered.
// widths: ming::widths::average_level<9>
module average_level #(
  parameter integer LAST = 255,
  parameter integer QMIN = -128,
  parameter integer LIMIT_BITS = 38,
  parameter integer U_BITS = 38,
  parameter integer THRESHOLD_BITS = 38,
  parameter integer DROP_BITS = 5,
  parameter integer SCALED_BITS = 16,
  parameter integer RATIO_BITS = 26,
  parameter integer OFFSET_BITS = 41,
  parameter integer PRODUCT_BITS = 42,
  parameter integer ESTIMATE_BITS = 44,
  parameter integer WHOLE_BITS = 20,
  parameter integer LEVEL_BITS = 8
) (
  input clk,
  input signed [LIMIT_BITS - 1:0] sum,
  input signed [LIMIT_BITS - 1:0] low,
  input signed [LIMIT_BITS - 1:0] high,
  input [DROP_BITS - 1:0] drop,
  input [RATIO_BITS - 1:0] ratio,
  input signed [OFFSET_BITS - 1:0] offset,
  (* io_register *) output reg [LEVEL_BITS - 1:0] address,
  input [THRESHOLD_BITS - 1:0] threshold,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [LIMIT_BITS - 1:0] sum_q, low_q, high_q;
  (* io_register *) reg [DROP_BITS - 1:0] drop_q;
  (* io_register *) reg [RATIO_BITS - 1:0] ratio_q;
  (* io_register *) reg signed [OFFSET_BITS - 1:0] offset_q;
  // the clamp and the estimate
  wire signed [LIMIT_BITS - 1:0] clamped = sum_q < low_q ? low_q : sum_q > high_q ? high_q : sum_q;
  wire signed [LIMIT_BITS:0] difference = clamped - low_q;
  wire [U_BITS - 1:0] u = difference[U_BITS - 1:0];
  wire [U_BITS - 1:0] shifted = u >> drop_q;
  wire [SCALED_BITS - 1:0] scaled = shifted[SCALED_BITS - 1:0];
  wire [PRODUCT_BITS - 1:0] product = scaled * ratio_q;
  wire signed [ESTIMATE_BITS - 1:0] estimate = $signed({2'b0, product}) + offset_q;
  wire signed [WHOLE_BITS - 1:0] whole = estimate >>> 24;
  wire [LEVEL_BITS - 1:0] k = whole < 0 ? {LEVEL_BITS{1'b0}} : whole > LAST ? LAST : whole[LEVEL_BITS - 1:0];
  // the datapath's pipeline registers: u and k the cycle the ROM answers
  wire [U_BITS - 1:0] u_d;
  wire [LEVEL_BITS - 1:0] k_d;
  average_level_delay #(.WIDTH(U_BITS + LEVEL_BITS)) delay(.clk(clk), .d({u, k}), .q({u_d, k_d}));
  wire below = u_d < threshold;
  wire signed [LEVEL_BITS + 1:0] value = $signed({2'b0, k_d}) - $signed({{(LEVEL_BITS + 1){1'b0}}, below}) + QMIN;
  always @(posedge clk) begin
    sum_q <= sum;
    low_q <= low;
    high_q <= high;
    drop_q <= drop;
    ratio_q <= ratio;
    offset_q <= offset;
    address <= k;
    y <= value[7:0];
  end
endmodule

// The pipeline registers of average_level, apart from its address register (keep_hierarchy: calibrate.py flattens
// the design after synthesis).
(* keep_hierarchy *)
module average_level_delay #(parameter WIDTH = 46) (
  input clk,
  input [WIDTH-1:0] d,
  output reg [WIDTH-1:0] q
);
  always @(posedge clk) q <= d;
endmodule
