// ming::mul_requant (ming_numerics.h, onnxruntime's QLinearMul; emit/templates/epilogues/mul.j2), one lane:
//   P = (a - a_zp) * (b - b_zp) (9 x 9 bits); V = round_to_float32(|P| * mantissa) (16 x 24 bits);
//   W = round_to_float32(|+-V + ((y_zp + offset) << SHIFT)|); y = sat(rne(+-W / 2^SHIFT) - offset).
// The zero points, the domain offset, the shift and the output range are constants of the process (parameters,
// folded). The mantissa is one too, a full 24-bit float32 mantissa: an input here, so the figure holds for any
// value. The widths are the C++'s (the *_BITS below, at the shift's largest value, 47): |P| <= 255^2 (16 bits),
// the zero point shifted below 2^55, their sum 56 bits signed.
// widths: ming::widths::requant_mul
module requant_mul #(
  parameter integer A_ZERO_POINT = 5,
  parameter integer B_ZERO_POINT = -7,
  parameter integer SHIFT = 30,
  parameter integer ZERO_POINT = -3,
  parameter integer OFFSET = 128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer CENTERED_BITS = 9,
  parameter integer PRODUCT_BITS = 17,
  parameter integer MAGNITUDE_BITS = 16,
  parameter integer MANTISSA_BITS = 24,
  parameter integer SCALED_BITS = 40,
  parameter integer VALUE_BITS = 41,
  parameter integer ZERO_BITS = 9,
  parameter integer ZERO_SHIFTED_BITS = 56,
  parameter integer SUM_BITS = 56,
  parameter integer SUM_MAGNITUDE_BITS = 55,
  parameter integer ROUNDED_BITS = 56,
  parameter integer LEVEL_BITS = 9
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input [MANTISSA_BITS - 1:0] mantissa,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg [MANTISSA_BITS - 1:0] mantissa_q;
  wire signed [CENTERED_BITS - 1:0] a_centered = a_q - A_ZERO_POINT;
  wire signed [CENTERED_BITS - 1:0] b_centered = b_q - B_ZERO_POINT;
  wire signed [PRODUCT_BITS - 1:0] product = a_centered * b_centered;
  wire negative = product[PRODUCT_BITS - 1];
  wire [MAGNITUDE_BITS - 1:0] magnitude = negative ? -product : product;
  wire [SCALED_BITS - 1:0] scaled = magnitude * mantissa_q;
  wire [VALUE_BITS - 2:0] v;
  ming_round_to_float32 #(.WIDTH(SCALED_BITS), .ROUNDED(VALUE_BITS - 1)) v_round(.m(scaled), .rounded(v));
  wire signed [ZERO_BITS - 1:0] zero = ZERO_POINT + OFFSET;
  wire signed [ZERO_SHIFTED_BITS - 1:0] zero_shifted = zero <<< SHIFT;
  wire signed [SUM_BITS - 1:0] sum = (negative ? -$signed({1'b0, v}) : $signed({1'b0, v})) + zero_shifted;
  wire sum_negative = sum[SUM_BITS - 1];
  wire [SUM_MAGNITUDE_BITS - 1:0] sum_magnitude = sum_negative ? -sum : sum;
  wire [ROUNDED_BITS - 2:0] w;
  ming_round_to_float32 #(.WIDTH(SUM_MAGNITUDE_BITS), .ROUNDED(ROUNDED_BITS - 1)) w_round(.m(sum_magnitude),
                                                                                       .rounded(w));
  wire signed [ROUNDED_BITS - 1:0] signed_w = sum_negative ? -$signed({1'b0, w}) : $signed({1'b0, w});
  wire signed [ROUNDED_BITS - 1:0] rounded;
  ming_rne_signed #(.WIDTH(ROUNDED_BITS), .SHIFT(SHIFT)) rne(.value(signed_w), .rounded(rounded));
  wire signed [LEVEL_BITS - 1:0] low = QMIN + OFFSET, high = QMAX + OFFSET;
  wire signed [LEVEL_BITS - 1:0] level = rounded < low ? low : rounded > high ? high : rounded[LEVEL_BITS - 1:0];
  wire signed [LEVEL_BITS:0] value = level - OFFSET;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    mantissa_q <= mantissa;
    y <= value[7:0];
  end
endmodule
