// ming::requantize_fixed_point<DoubleRound> (ming_numerics.h, TFLite's TOSA RESCALE), one lane:
//   rounding = 2^(shift-1) (+-2^30 when DoubleRound and shift > 31, by the sign of acc);
//   product = acc * multiplier (int32 x int32); scaled = int32((product + rounding) >> shift) (floor);
//   y = sat(int32(scaled + zero_point)).
// FROM_ROMS = 1: multiplier (int32_t) and shift (uint8_t) are inputs, read from ROMs (emit/templates/epilogues/
//   fixed_point.j2: per channel, [output tile][lane]; fixed_point_average.j2: by the window's valid count): the
//   rounding is a variable 2^(shift-1), the shift a 64-bit barrel shifter.
// FROM_ROMS = 0: MULTIPLIER and SHIFT are constants of the process (eltwise.cpp.j2's Add,
//   fixed_point_scalar.j2's average over the whole map, fixed_point_mul.j2's MUL): the product is by a
//   constant, the rounding a select of two constants by the sign of acc (one constant without double
//   rounding), the shift wiring (only the sum's bits below SHIFT + 32 are used).
// The zero point, the output range and DOUBLE_ROUND (the template argument) are constants of the process.
// Widths (*_BITS, the C++'s: int32_t acc and multiplier, the uint8_t shift of the ROM, the int64_t product, rounding
// and sum, the int32_t scaled value and level): named as the convention of tests/test_calibration_widths.py asks,
// to be tied to a struct ming::widths::requant_fixed_point of ming_numerics.h once the C++ declares one.
module requant_fixed_point #(
  parameter FROM_ROMS = 1,
  parameter MULTIPLIER = 1098017566,
  parameter SHIFT = 48,
  parameter DOUBLE_ROUND = 1,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer ACC_BITS = 32,
  parameter integer MULTIPLIER_BITS = 32,
  parameter integer SHIFT_BITS = 8,
  parameter integer PRODUCT_BITS = 64,
  parameter integer SUM_BITS = 64,
  parameter integer SCALED_BITS = 32,
  parameter integer LEVEL_BITS = 32
) (
  input clk,
  input signed [ACC_BITS - 1:0] acc,
  input signed [MULTIPLIER_BITS - 1:0] multiplier,
  input [SHIFT_BITS - 1:0] shift,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [ACC_BITS - 1:0] acc_q;
  (* io_register *) reg signed [MULTIPLIER_BITS - 1:0] multiplier_q;
  (* io_register *) reg [SHIFT_BITS - 1:0] shift_q;
  localparam signed [MULTIPLIER_BITS - 1:0] MULTIPLIER_VALUE = MULTIPLIER;
  wire signed [MULTIPLIER_BITS - 1:0] multiplier_value = FROM_ROMS ? multiplier_q : MULTIPLIER_VALUE;
  wire [SHIFT_BITS - 1:0] shift_value = FROM_ROMS ? shift_q : SHIFT;
  wire signed [SUM_BITS - 1:0] half = 1 << (shift_value - 1'b1);
  wire signed [SUM_BITS - 1:0] double_round = DOUBLE_ROUND && shift_value > 31 ?
                                              (acc_q >= 0 ? 1073741824 : -1073741824) : 0;
  wire signed [SUM_BITS - 1:0] rounding = half + double_round;
  wire signed [PRODUCT_BITS - 1:0] product = acc_q * multiplier_value;
  wire signed [SUM_BITS:0] variable_total;
  ming_add #(.WIDTH(SUM_BITS)) total_add(.a(product), .b(rounding), .sum(variable_total));
  // with constants a plain `+`: the constant rounding folds into the adder and its unused top bits go, as in
  // Vitis HLS (ming_add's kept hierarchy would stop both)
  wire signed [SUM_BITS:0] total = FROM_ROMS ? variable_total : product + rounding;
  wire signed [SUM_BITS - 1:0] shifted = $signed(total[SUM_BITS - 1:0]) >>> shift_value;
  wire signed [SCALED_BITS - 1:0] scaled = shifted[SCALED_BITS - 1:0];
  wire signed [LEVEL_BITS - 1:0] value = scaled + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    multiplier_q <= multiplier;
    shift_q <= shift;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
