// ming::requantize_narrow (ming_numerics.h), one lane, at the widths of its types: the accumulator clamped to
//   [LOW, HIGH] less CENTER (OPERAND_BITS bits, signed: 18, or 27 where a layer's accumulators span more), times
//   the multiplier (26 bits, unsigned), plus the rounding of its sign (48 bits: the DSP48E2 post-adder), >> SHIFT
//   (wiring), the zero point, the saturation.
// multiplier and the two roundings come from per-channel ROMs (inputs); LOW, HIGH, CENTER, SHIFT, the zero point
// and the output range are constants of the process. The defaults are those of a resnet8 layer (tests/data/converted).
module requant_narrow #(
  parameter integer OPERAND_BITS = 18,
  parameter integer SHIFT = 31,
  parameter integer LOW = 91,
  parameter integer HIGH = 154205,
  parameter integer CENTER = 131072,
  parameter integer ZERO_POINT = -128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [31:0] acc,
  input [25:0] multiplier,
  input signed [47:0] rounding_negative,
  input signed [47:0] rounding,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q;
  (* io_register *) reg [25:0] multiplier_q;
  (* io_register *) reg signed [47:0] rounding_negative_q, rounding_q;
  wire signed [31:0] clamped = acc_q < LOW ? LOW : acc_q > HIGH ? HIGH : acc_q;
  wire signed [31:0] centred_full = clamped - CENTER;
  wire signed [OPERAND_BITS-1:0] operand = centred_full[OPERAND_BITS-1:0];
  wire signed [47:0] added = acc_q[31] ? rounding_negative_q : rounding_q;
  // the product and the post-adder: one DSP48E2 (P = A * B + C)
  wire signed [47:0] sum = operand * $signed({1'b0, multiplier_q}) + added;
  wire signed [47:0] level = sum >>> SHIFT;
  wire signed [47:0] value = level + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    multiplier_q <= multiplier;
    rounding_negative_q <= rounding_negative;
    rounding_q <= rounding;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
