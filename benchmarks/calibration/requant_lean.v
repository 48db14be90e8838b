// ming::requantize_lean (ming_numerics.h), one lane, at the widths of its masks:
//   |acc| clamped to limit and to 24 bits, a 24 x 27-bit product, whole = (product >> s) & 0x7FF, the fraction's
//   distance from one half against a band placed by the 11-bit priority encoder bit_length(whole), the sign,
//   the zero point and the saturation.
// SHIFT_BY_CHANNEL = 0: the shift is the constant SHIFT of the process (the shifts and masks are wiring);
// 1: it comes from the per-channel ROM (uint8_t), an input. mantissa and limit come from uint32_t ROMs.
// The zero point and the output range are constants of the process.
module requant_lean #(
  parameter SHIFT = 34,
  parameter SHIFT_BY_CHANNEL = 0,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
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
  wire [5:0] s = shift_value < 1 ? 6'd1 : shift_value > 51 ? 6'd51 : shift_value[5:0];

  wire negative = acc_q[31];
  wire [31:0] magnitude = negative ? -acc_q : acc_q;
  wire [23:0] a = magnitude < limit_q ? magnitude[23:0] : limit_q[23:0];
  wire [50:0] product = a * mantissa_q[26:0];

  wire [50:0] shifted = product >> s;
  wire [10:0] whole = shifted[10:0];
  wire [50:0] half = 51'd1 << (s - 1'b1);
  wire [50:0] fraction = product & ~({51{1'b1}} << s);
  wire [3:0] whole_bits;
  ming_bit_length #(.WIDTH(11), .OUT(4)) leading(.value(whole), .length(whole_bits));
  wire signed [7:0] position = $signed({2'b0, s}) + $signed({4'b0, whole_bits}) - 8'sd24;
  wire [50:0] band = position >= 1 ? 51'd1 << (position - 1) : 51'd0;
  wire [50:0] distance = fraction >= half ? fraction - half : half - fraction;
  wire up = (fraction > half && distance > band) || (distance <= band && whole[0]);
  wire [11:0] rounded = whole + up;

  wire signed [13:0] signed_rounded = negative ? -$signed({2'b0, rounded}) : $signed({2'b0, rounded});
  wire signed [13:0] value = signed_rounded + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    mantissa_q <= mantissa;
    limit_q <= limit;
    shift_q <= shift;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
