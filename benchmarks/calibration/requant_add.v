// ming::add_requant (ming_numerics.h, onnxruntime's QLinearAdd, numerics.add_fused_requant; emit/templates/epilogues/
// add.j2 with p.fused), one lane:
//   a' = a + OFFSET, b' = b + OFFSET;  inner = rn24(b' * MB + F);  outer = rn24(a' * MA + inner);
//   y = sat(rne(outer / 2^SHIFT), QMIN + OFFSET, QMAX + OFFSET) - OFFSET
// with rn24 the signed round_to_float32 (the magnitude's mask-and-add, the sign back). The constants of
// numerics.add_constants are constants of the process (literals in the C++; parameters here, folded): the shift,
// the offset (the domain onnxruntime runs the kernel in, 128 = uint8), the output range, and the float32 constants
// at the binary point 2^-SHIFT: MA = a_mantissa << A_EXP, MB = b_mantissa << B_EXP (float32 ratios, positive; their
// trailing zeros are wiring) and F = FIXED_MANTISSA << FIXED_EXP (signed; the zero points are in it). The two
// 24-bit mantissas are inputs here, as requant_mul's, so the figure holds for any value: two 9 x 24-bit products.
// Each intermediate has the C++'s width (the *_BITS below): ming::add_requant<MaBits, MbBits, FixedBits> takes the
// bit lengths of the process's constants as template arguments and sizes every value by its range; at these
// parameters MA < 2^(24 + A_EXP) = 2^26, MB < 2^24, |F| = 13200810 * 2^9 < 2^33.
// widths: ming::widths::requant_add<26, 24, 33>
module requant_add #(
  parameter integer A_EXP = 2,
  parameter integer B_EXP = 0,
  parameter integer FIXED_MANTISSA = -13200810,
  parameter integer FIXED_EXP = 9,
  parameter integer SHIFT = 24,
  parameter integer OFFSET = 128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer SHIFTED_BITS = 9,
  parameter integer MA_BITS = 26,
  parameter integer MB_BITS = 24,
  parameter integer FIXED_BITS = 34,
  parameter integer A_PRODUCT_BITS = 35,
  parameter integer B_PRODUCT_BITS = 33,
  parameter integer INNER_SUM_BITS = 35,
  parameter integer INNER_MAGNITUDE_BITS = 34,
  parameter integer INNER_BITS = 35,
  parameter integer OUTER_SUM_BITS = 36,
  parameter integer OUTER_MAGNITUDE_BITS = 35,
  parameter integer OUTER_BITS = 36,
  parameter integer LEVEL_BITS = 9
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input [23:0] a_mantissa,
  input [23:0] b_mantissa,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg [23:0] a_mantissa_q, b_mantissa_q;
  wire signed [SHIFTED_BITS - 1:0] a_offset = a_q + OFFSET;
  wire signed [SHIFTED_BITS - 1:0] b_offset = b_q + OFFSET;
  wire [MA_BITS - 1:0] ma = a_mantissa_q << A_EXP;  // the exponent is wiring
  wire [MB_BITS - 1:0] mb = b_mantissa_q << B_EXP;
  wire signed [FIXED_BITS - 1:0] fixed_mantissa = FIXED_MANTISSA;
  wire signed [FIXED_BITS - 1:0] fixed = fixed_mantissa <<< FIXED_EXP;
  wire signed [A_PRODUCT_BITS - 1:0] a_product = a_offset * $signed({1'b0, ma});
  wire signed [B_PRODUCT_BITS - 1:0] b_product = b_offset * $signed({1'b0, mb});
  // inner = rn24(b' * MB + F)
  wire signed [INNER_SUM_BITS - 1:0] inner_sum = b_product + fixed;
  wire inner_negative = inner_sum[INNER_SUM_BITS - 1];
  wire [INNER_MAGNITUDE_BITS - 1:0] inner_magnitude = inner_negative ? -inner_sum : inner_sum;
  wire [INNER_BITS - 2:0] inner_rounded;
  ming_round_to_float32 #(.WIDTH(INNER_MAGNITUDE_BITS), .ROUNDED(INNER_BITS - 1)) inner_round(
    .m(inner_magnitude), .rounded(inner_rounded));
  wire signed [INNER_BITS - 1:0] inner = inner_negative ? -$signed({1'b0, inner_rounded})
                                                        : $signed({1'b0, inner_rounded});
  // outer = rn24(a' * MA + inner)
  wire signed [OUTER_SUM_BITS - 1:0] outer_sum = a_product + inner;
  wire outer_negative = outer_sum[OUTER_SUM_BITS - 1];
  wire [OUTER_MAGNITUDE_BITS - 1:0] outer_magnitude = outer_negative ? -outer_sum : outer_sum;
  wire [OUTER_BITS - 2:0] outer_rounded;
  ming_round_to_float32 #(.WIDTH(OUTER_MAGNITUDE_BITS), .ROUNDED(OUTER_BITS - 1)) outer_round(
    .m(outer_magnitude), .rounded(outer_rounded));
  wire signed [OUTER_BITS - 1:0] outer = outer_negative ? -$signed({1'b0, outer_rounded})
                                                        : $signed({1'b0, outer_rounded});
  // the rounding at the binary point, the saturation in the kernel's domain, the offset off
  wire signed [OUTER_BITS - 1:0] rounded;
  ming_rne_signed #(.WIDTH(OUTER_BITS), .SHIFT(SHIFT)) rne(.value(outer), .rounded(rounded));
  wire signed [LEVEL_BITS - 1:0] saturated = rounded < QMIN + OFFSET ? QMIN + OFFSET
                                           : rounded > QMAX + OFFSET ? QMAX + OFFSET : rounded[LEVEL_BITS - 1:0];
  wire signed [LEVEL_BITS:0] value = saturated - OFFSET;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    a_mantissa_q <= a_mantissa;
    b_mantissa_q <= b_mantissa;
    y <= value[7:0];
  end
endmodule
