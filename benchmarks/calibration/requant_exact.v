// ming::requantize (ming_numerics.h: requantize_i32, the exact float32 emulation), one lane, at the C++'s widths
// (the *_BITS below: its int32 accumulator's value ranges):
//   a = |acc| (int32 acc), rounded to 24 significant bits: a_m * 2^d1 (bit_length, a variable rne shift);
//   p = a_m * mantissa (25 x 24 bits), rounded to 24 significant bits: p_m * 2^d2;
//   e = d1 + d2 + exponent; |y| = p_m << e (e <= 16), 2^40 (e > 16) or rne(p_m / 2^-e);
//   y = sat(+-|y| + zero_point).
// mantissa (< 2^24) and exponent ([-149, 104]) come from per-channel ROMs; the zero point and the output range
// are constants of the process.
// widths: ming::widths::requant_exact
module requant_exact #(
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer MAGNITUDE_BITS = 32,
  parameter integer MANTISSA_BITS = 24,
  parameter integer ROUNDED_BITS = 25,
  parameter integer PRODUCT_BITS = 48,
  parameter integer EXPONENT_BITS = 9,
  parameter integer DROP_BITS = 5,
  parameter integer TOTAL_BITS = 9,
  parameter integer LEVEL_BITS = 41,
  parameter integer SUM_BITS = 42
) (
  input clk,
  input signed [31:0] acc,
  input [MANTISSA_BITS - 1:0] mantissa,
  input signed [EXPONENT_BITS - 1:0] exponent,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q;
  (* io_register *) reg [MANTISSA_BITS - 1:0] mantissa_q;
  (* io_register *) reg signed [EXPONENT_BITS - 1:0] exponent_q;

  wire negative = acc_q[31];
  wire [MAGNITUDE_BITS - 1:0] a = negative ? -acc_q : acc_q;
  wire [5:0] a_bits;
  ming_bit_length #(.WIDTH(MAGNITUDE_BITS), .OUT(6)) a_length(.value(a), .length(a_bits));
  wire [DROP_BITS - 1:0] d1 = a_bits > 24 ? a_bits - 6'd24 : {DROP_BITS{1'b0}};
  wire [MAGNITUDE_BITS - 1:0] a_rounded;
  ming_rne_unsigned #(.WIDTH(MAGNITUDE_BITS), .SHIFT_BITS(DROP_BITS)) a_rne(.value(a), .shift(d1),
                                                                           .rounded(a_rounded));
  wire [ROUNDED_BITS - 1:0] a_m = a_rounded[ROUNDED_BITS - 1:0];

  wire [PRODUCT_BITS - 1:0] p = a_m * mantissa_q;
  wire [5:0] p_bits;
  ming_bit_length #(.WIDTH(PRODUCT_BITS), .OUT(6)) p_length(.value(p), .length(p_bits));
  wire [DROP_BITS - 1:0] d2 = p_bits > 24 ? p_bits - 6'd24 : {DROP_BITS{1'b0}};
  wire [PRODUCT_BITS - 1:0] p_rounded;
  ming_rne_unsigned #(.WIDTH(PRODUCT_BITS), .SHIFT_BITS(DROP_BITS)) p_rne(.value(p), .shift(d2),
                                                                         .rounded(p_rounded));
  wire [ROUNDED_BITS - 1:0] p_m = p_rounded[ROUNDED_BITS - 1:0];

  wire signed [TOTAL_BITS - 1:0] e_total = $signed({1'b0, d1}) + $signed({1'b0, d2}) + exponent_q;
  wire [5:0] right = e_total < -63 ? 6'd63 : -e_total;
  wire [ROUNDED_BITS - 1:0] p_m_right;
  ming_rne_unsigned #(.WIDTH(ROUNDED_BITS), .SHIFT_BITS(6)) e_rne(.value(p_m), .shift(right),
                                                                   .rounded(p_m_right));
  wire [LEVEL_BITS - 1:0] magnitude = e_total > 16 ? (p_m != 0 ? {1'b1, {(LEVEL_BITS - 1){1'b0}}} : 0)
                                    : e_total >= 0 ? p_m << e_total[4:0] : p_m_right;

  wire signed [SUM_BITS - 1:0] value = (negative ? -$signed({1'b0, magnitude}) : $signed({1'b0, magnitude}))
                                     + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    mantissa_q <= mantissa;
    exponent_q <= exponent;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
