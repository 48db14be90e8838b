// ming::requantize_fixed_point<true> (ming_numerics.h, TFLite's TOSA RESCALE with double rounding), one lane:
//   rounding = 2^(shift-1) (+-2^30 when shift > 31, by the sign of acc); product = acc * multiplier (32 x 32 bits);
//   scaled = int32((product + rounding) >> shift) (floor); y = sat(int32(scaled + zero_point)).
// multiplier (int32_t) and shift (uint8_t) come from per-channel ROMs; the zero point and the output range are
// constants of the process.
module requant_fixed_point #(
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [31:0] acc,
  input signed [31:0] multiplier,
  input [7:0] shift,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q, multiplier_q;
  (* io_register *) reg [7:0] shift_q;
  wire signed [63:0] half = 64'sd1 << (shift_q - 1'b1);
  wire signed [63:0] double_round = shift_q > 31 ? (acc_q >= 0 ? 64'sd1073741824 : -64'sd1073741824) : 64'sd0;
  wire signed [63:0] rounding = half + double_round;
  wire signed [63:0] product = acc_q * multiplier_q;
  wire signed [64:0] total;
  ming_add #(.WIDTH(64)) total_add(.a(product), .b(rounding), .sum(total));
  wire signed [63:0] shifted = $signed(total[63:0]) >>> shift_q;
  wire signed [31:0] scaled = shifted[31:0];
  wire signed [31:0] value = scaled + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    multiplier_q <= multiplier;
    shift_q <= shift;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
