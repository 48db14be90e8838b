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
// The C++ computes in int64; each intermediate here has the width its values take at these constants (a product
// 33 bits signed, a sum one bit more than its wider term; a magnitude is rounded at its sum's width, the sign
// bit's place taking the rounding's carry).
module requant_add #(
  parameter integer A_EXP = 2,
  parameter integer B_EXP = 0,
  parameter integer FIXED_MANTISSA = -13200810,
  parameter integer FIXED_EXP = 9,
  parameter integer SHIFT = 24,
  parameter integer OFFSET = 128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input [23:0] a_mantissa,
  input [23:0] b_mantissa,
  (* io_register *) output reg signed [7:0] y
);
  localparam integer PA = 33 + A_EXP;  // a' * MA, signed
  localparam integer PB = 33 + B_EXP;  // b' * MB, signed
  localparam integer PF = 25 + FIXED_EXP;  // F, signed
  localparam integer WI = (PB > PF ? PB : PF) + 1;  // b' * MB + F, signed; its magnitude and rounding (< 2^(WI-1))
  localparam integer WO = (PA > WI + 1 ? PA : WI + 1) + 1;  // a' * MA + inner, signed; its magnitude and rounding
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg [23:0] a_mantissa_q, b_mantissa_q;
  wire signed [8:0] a_offset = a_q + OFFSET;
  wire signed [8:0] b_offset = b_q + OFFSET;
  wire signed [32:0] a_product = a_offset * $signed({1'b0, a_mantissa_q});
  wire signed [32:0] b_product = b_offset * $signed({1'b0, b_mantissa_q});
  // inner = rn24(b' * MB + F)
  wire signed [WI - 1:0] b_term = b_product;
  wire signed [WI - 1:0] fixed_mantissa = FIXED_MANTISSA;
  wire signed [WI - 1:0] inner_sum = (b_term <<< B_EXP) + (fixed_mantissa <<< FIXED_EXP);
  wire inner_negative = inner_sum[WI - 1];
  wire [WI - 1:0] inner_magnitude = inner_negative ? -inner_sum : inner_sum;
  wire [WI - 1:0] inner_rounded;
  ming_round_to_float32 #(.WIDTH(WI)) inner_round(.m(inner_magnitude), .rounded(inner_rounded));
  wire signed [WI:0] inner = inner_negative ? -$signed({1'b0, inner_rounded}) : $signed({1'b0, inner_rounded});
  // outer = rn24(a' * MA + inner)
  wire signed [WO - 1:0] a_term = a_product;
  wire signed [WO - 1:0] outer_sum = (a_term <<< A_EXP) + inner;
  wire outer_negative = outer_sum[WO - 1];
  wire [WO - 1:0] outer_magnitude = outer_negative ? -outer_sum : outer_sum;
  wire [WO - 1:0] outer_rounded;
  ming_round_to_float32 #(.WIDTH(WO)) outer_round(.m(outer_magnitude), .rounded(outer_rounded));
  wire signed [WO:0] outer = outer_negative ? -$signed({1'b0, outer_rounded}) : $signed({1'b0, outer_rounded});
  // the rounding at the binary point, the saturation in the kernel's domain, the offset off
  wire signed [WO:0] rounded;
  ming_rne_signed #(.WIDTH(WO + 1), .SHIFT(SHIFT)) rne(.value(outer), .rounded(rounded));
  wire signed [9:0] saturated = rounded < QMIN + OFFSET ? QMIN + OFFSET
                              : rounded > QMAX + OFFSET ? QMAX + OFFSET : rounded[9:0];
  wire signed [9:0] value = saturated - OFFSET;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    a_mantissa_q <= a_mantissa;
    b_mantissa_q <= b_mantissa;
    y <= value[7:0];
  end
endmodule
