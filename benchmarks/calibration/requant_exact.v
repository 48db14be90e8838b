// ming::requantize (ming_numerics.h: requantize_i32, the exact float32 emulation), one lane, at the widths of
// its contract (the C++ computes in int64; these are the widths its value ranges need):
//   a = |acc| (int32 acc), rounded to 24 significant bits: a_m * 2^d1 (bit_length, a variable rne shift);
//   p = a_m * mantissa (25 x 24 bits), rounded to 24 significant bits: p_m * 2^d2;
//   e = d1 + d2 + exponent; |y| = p_m << e (e <= 16), 2^40 (e > 16) or rne(p_m / 2^-e);
//   y = sat(+-|y| + zero_point).
// mantissa (< 2^24) and exponent ([-149, 104]) come from per-channel ROMs; the zero point and the output range
// are constants of the process.
module requant_exact #(
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [31:0] acc,
  input [23:0] mantissa,
  input signed [8:0] exponent,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q;
  (* io_register *) reg [23:0] mantissa_q;
  (* io_register *) reg signed [8:0] exponent_q;

  wire negative = acc_q[31];
  wire [31:0] a = negative ? -acc_q : acc_q;
  wire [5:0] a_bits;
  ming_bit_length #(.WIDTH(32), .OUT(6)) a_length(.value(a), .length(a_bits));
  wire [3:0] d1 = a_bits > 24 ? a_bits - 6'd24 : 4'd0;
  wire [31:0] a_rounded;
  ming_rne_unsigned #(.WIDTH(32), .SHIFT_BITS(4)) a_rne(.value(a), .shift(d1), .rounded(a_rounded));
  wire [24:0] a_m = a_rounded[24:0];

  wire [48:0] p = a_m * mantissa_q;
  wire [5:0] p_bits;
  ming_bit_length #(.WIDTH(49), .OUT(6)) p_length(.value(p), .length(p_bits));
  wire [4:0] d2 = p_bits > 24 ? p_bits - 6'd24 : 5'd0;
  wire [48:0] p_rounded;
  ming_rne_unsigned #(.WIDTH(49), .SHIFT_BITS(5)) p_rne(.value(p), .shift(d2), .rounded(p_rounded));
  wire [24:0] p_m = p_rounded[24:0];

  wire signed [10:0] e_total = $signed({7'b0, d1}) + $signed({6'b0, d2}) + exponent_q;
  wire [5:0] right = e_total < -63 ? 6'd63 : -e_total;
  wire [24:0] p_m_right;
  ming_rne_unsigned #(.WIDTH(25), .SHIFT_BITS(6)) e_rne(.value(p_m), .shift(right), .rounded(p_m_right));
  wire [40:0] magnitude = e_total > 16 ? (p_m != 0 ? 41'd1 << 40 : 41'd0)
                        : e_total >= 0 ? {16'b0, p_m} << e_total[4:0] : {16'b0, p_m_right};

  wire signed [42:0] signed_magnitude = negative ? -$signed({2'b0, magnitude}) : $signed({2'b0, magnitude});
  wire signed [42:0] value = signed_magnitude + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    mantissa_q <= mantissa;
    exponent_q <= exponent;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
