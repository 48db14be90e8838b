// ming::mul_requant (ming_numerics.h, onnxruntime's QLinearMul; emit/templates/epilogues/mul.j2), one lane:
//   P = (a - a_zp) * (b - b_zp) (9 x 9 bits); V = round_to_float32(|P| * mantissa) (17 x 24 bits);
//   W = round_to_float32(|+-V + ((y_zp + offset) << SHIFT)|) (56 bits); y = sat(rne(+-W / 2^SHIFT) - offset).
// The zero points, the domain offset, the shift and the output range are constants of the process (parameters,
// folded). The mantissa is one too, a full 24-bit float32 mantissa: an input here, so the figure holds for any
// value.
module requant_mul #(
  parameter integer A_ZERO_POINT = 5,
  parameter integer B_ZERO_POINT = -7,
  parameter integer SHIFT = 30,
  parameter integer ZERO_POINT = -3,
  parameter integer OFFSET = 128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input [23:0] mantissa,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg [23:0] mantissa_q;
  wire signed [8:0] a_centered = a_q - A_ZERO_POINT;
  wire signed [8:0] b_centered = b_q - B_ZERO_POINT;
  wire signed [17:0] product = a_centered * b_centered;
  wire negative = product[17];
  wire [16:0] magnitude = negative ? -product : product;
  wire [40:0] scaled = magnitude * mantissa_q;
  wire [40:0] v;
  ming_round_to_float32 #(.WIDTH(41)) v_round(.m(scaled), .rounded(v));
  wire signed [56:0] sum = (negative ? -$signed({16'b0, v}) : $signed({16'b0, v}))
                         + ($signed(ZERO_POINT + OFFSET) <<< SHIFT);
  wire sum_negative = sum[56];
  wire [55:0] sum_magnitude = sum_negative ? -sum : sum;
  wire [55:0] w;
  ming_round_to_float32 #(.WIDTH(56)) w_round(.m(sum_magnitude), .rounded(w));
  wire signed [56:0] signed_w = sum_negative ? -$signed({1'b0, w}) : $signed({1'b0, w});
  wire signed [56:0] rounded;
  ming_rne_signed #(.WIDTH(57), .SHIFT(SHIFT)) rne(.value(signed_w), .rounded(rounded));
  wire signed [56:0] value = rounded - OFFSET;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    mantissa_q <= mantissa;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
