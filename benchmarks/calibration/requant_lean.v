// ming::requantize_lean (ming_numerics.h), one lane, as the C++ computes it, at the widths of its masks and ranges:
//   |acc| clamped to limit and to 24 bits (& 0xFFFFFF), a 24 x 27-bit product (mantissa & 0x7FFFFFF),
//   whole = (product >> s) & 0x7FF, the fraction product & ((1 << s) - 1) and its distance from one half
//   1 << (s - 1) against the band 1 << (position - 1) placed by the 11-bit priority encoder bit_length(whole)
//   (position = s + bit_length(whole) - 24), rounded = whole + up, the sign, the zero point and the saturation.
// SHIFT_BY_CHANNEL = 0: the shift is the constant SHIFT of the process (the shifts and masks are wiring);
// 1: it comes from the per-channel ROM (uint8_t), an input. mantissa and limit come from uint32_t ROMs.
// The zero point and the output range are constants of the process.
// Widths (*_BITS, the C++'s): of each value's range where the C++ masks or bounds it: |acc| 32 bits, the clamped
// operand 24, the mantissa 27, the product and the fraction 51, the shift 1 .. 51 (6), the whole part 11, rounded
// 12, the position -23 .. 38 (7, signed), the band below 2^38 (38), the zero point 9 (signed), the level
// +-(2^11 + 255) (13, signed).
// widths: ming::widths::requant_lean
module requant_lean #(
  parameter SHIFT = 34,
  parameter SHIFT_BY_CHANNEL = 0,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer MAGNITUDE_BITS = 32,
  parameter integer CLAMPED_BITS = 24,
  parameter integer MANTISSA_BITS = 27,
  parameter integer PRODUCT_BITS = 51,
  parameter integer SHIFT_BITS = 6,
  parameter integer WHOLE_BITS = 11,
  parameter integer ROUNDED_BITS = 12,
  parameter integer POSITION_BITS = 7,
  parameter integer FRACTION_BITS = 51,
  parameter integer BAND_BITS = 38,
  parameter integer ZERO_POINT_BITS = 9,
  parameter integer LEVEL_BITS = 13
) (
  input clk,
  input signed [31:0] acc,
  input [31:0] mantissa,
  input [31:0] limit,
  input [7:0] shift,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q;
  (* io_register *) reg [31:0] mantissa_q, limit_q;
  (* io_register *) reg [7:0] shift_q;
  wire [7:0] shift_value = SHIFT_BY_CHANNEL ? shift_q : SHIFT;
  wire [SHIFT_BITS - 1:0] s = shift_value < 1 ? 1 : shift_value > 51 ? 51 : shift_value[SHIFT_BITS - 1:0];

  wire negative = acc_q[31];
  wire [MAGNITUDE_BITS - 1:0] magnitude = negative ? -acc_q : acc_q;
  wire [MAGNITUDE_BITS - 1:0] bound = limit_q;
  wire [CLAMPED_BITS - 1:0] a = magnitude < bound ? magnitude[CLAMPED_BITS - 1:0] : bound[CLAMPED_BITS - 1:0];
  wire [MANTISSA_BITS - 1:0] m = mantissa_q[MANTISSA_BITS - 1:0];
  wire [PRODUCT_BITS - 1:0] product = a * m;

  wire [WHOLE_BITS - 1:0] whole = product >> s;
  wire [FRACTION_BITS - 1:0] half = 1 << (s - 1'b1);
  wire [FRACTION_BITS - 1:0] fraction = product & ((1 << s) - 1);
  wire [3:0] whole_bits;
  ming_bit_length #(.WIDTH(WHOLE_BITS), .OUT(4)) leading(.value(whole), .length(whole_bits));
  wire signed [POSITION_BITS - 1:0] position = $signed({1'b0, s}) + $signed({1'b0, whole_bits}) - 24;
  wire [BAND_BITS - 1:0] band = position >= 1 ? 1 << (position - 1) : 0;
  wire [FRACTION_BITS - 1:0] distance = fraction >= half ? fraction - half : half - fraction;
  wire up = (fraction > half && distance > band) || (distance <= band && whole[0]);
  wire [ROUNDED_BITS - 1:0] rounded = whole + up;

  wire signed [ZERO_POINT_BITS - 1:0] zero_point = ZERO_POINT;
  wire signed [LEVEL_BITS - 1:0] level = (negative ? -$signed({1'b0, rounded}) : $signed({1'b0, rounded})) +
                                         zero_point;
  always @(posedge clk) begin
    acc_q <= acc;
    mantissa_q <= mantissa;
    limit_q <= limit;
    shift_q <= shift;
    y <= level < QMIN ? QMIN : level > QMAX ? QMAX : level[7:0];
  end
endmodule
