// ming::requantize_fixed_point<DoubleRound> (ming_numerics.h, TFLite's TOSA RESCALE), one lane, as the C++ computes
// it (the form of the C++ with exact widths, ming::widths::requant_fixed_point), no 64-bit sum:
//   s = clamp(shift, 2, 62); product = acc * multiplier (63 bits: int32 x a non-negative Q31 multiplier);
//   quotient = product >> s (floor); remainder = product & ((1 << s) - 1);
//   threshold = 2^(s-1), with DoubleRound and s > 31 less 2^30 for acc >= 0 and more 2^30 below;
//   scaled = int32(quotient + (remainder >= threshold)); y = sat(int32(scaled + zero_point)).
// FROM_ROMS = 1: multiplier (int32_t) and shift (uint8_t) are inputs, read from ROMs (emit/templates/epilogues/
//   fixed_point.j2: per channel, [output tile][lane]; fixed_point_average.j2: by the window's valid count): the
//   quotient and the remainder's mask are variable shifts, the threshold a variable power of two.
// FROM_ROMS = 0: MULTIPLIER and SHIFT are constants of the process (eltwise.cpp.j2's Add,
//   fixed_point_scalar.j2's average over the whole map, fixed_point_mul.j2's MUL): the product is by a
//   constant, the quotient and remainder wiring, the threshold a select of two constants by the sign of acc
//   (one constant without double rounding).
// The zero point, the output range and DOUBLE_ROUND (the template argument) are constants of the process; the
// *_BITS are the C++'s.
// widths: ming::widths::requant_fixed_point
module requant_fixed_point #(
  parameter FROM_ROMS = 1,
  parameter MULTIPLIER = 1098017566,
  parameter SHIFT = 48,
  parameter DOUBLE_ROUND = 1,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer ACC_BITS = 32,
  parameter integer MULTIPLIER_BITS = 31,
  parameter integer PRODUCT_BITS = 63,
  parameter integer QUOTIENT_BITS = 61,
  parameter integer REMAINDER_BITS = 62,
  parameter integer THRESHOLD_BITS = 62
) (
  input clk,
  input signed [ACC_BITS - 1:0] acc,
  input signed [31:0] multiplier,
  input [7:0] shift,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [ACC_BITS - 1:0] acc_q;
  (* io_register *) reg signed [31:0] multiplier_q;
  (* io_register *) reg [7:0] shift_q;
  localparam [MULTIPLIER_BITS - 1:0] MULTIPLIER_VALUE = MULTIPLIER;
  wire [MULTIPLIER_BITS - 1:0] multiplier_value = FROM_ROMS ? multiplier_q[MULTIPLIER_BITS - 1:0] : MULTIPLIER_VALUE;
  wire [7:0] shift_value = FROM_ROMS ? shift_q : SHIFT;
  wire [5:0] s = shift_value < 2 ? 6'd2 : shift_value > 62 ? 6'd62 : shift_value[5:0];
  wire signed [PRODUCT_BITS - 1:0] product = acc_q * $signed({1'b0, multiplier_value});
  wire signed [QUOTIENT_BITS - 1:0] quotient = product >>> s;
  wire [REMAINDER_BITS - 1:0] remainder = product & ((1 << s) - 1);
  wire [THRESHOLD_BITS - 1:0] half = 1 << (s - 1'b1);
  wire [THRESHOLD_BITS - 1:0] threshold = !DOUBLE_ROUND || s <= 31 ? half :
                                          acc_q >= 0 ? half - 1073741824 : half + 1073741824;
  wire signed [31:0] scaled = quotient[31:0] + (remainder >= threshold);
  wire signed [31:0] value = scaled + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    multiplier_q <= multiplier;
    shift_q <= shift;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
