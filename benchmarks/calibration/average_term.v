// ming::average_term (ming_numerics.h, onnxruntime's QLinearAveragePool over windows, the exact chain of
// numerics.window_average_terms), one window element of one lane:
//   term = rn24((x - X_ZERO_POINT) * mantissa)
// the float32 sx * (x - zx) in units of 2^exponent (x_scale = mantissa * 2^exponent), with rn24 the signed
// round_to_float32 (the magnitude's mask-and-add, the sign back). The zero point is a constant of the process
// (a parameter, folded). The mantissa is one too, the float32 input scale's 24-bit mantissa in [2^23, 2^24): an
// input here, as requant_add's, so the figure holds for any value. x - zx takes 9 bits signed, the product
// 9 x 24 bits (signed x unsigned) 33 bits signed (|x - zx| <= 255: |product| < 2^32); its magnitude is rounded
// at the product's width, the sign bit's place taking the rounding's carry, and the term, 34 bits signed, is the
// width the chain's adder (average_add) takes.
module average_term #(
  parameter integer X_ZERO_POINT = 5
) (
  input clk,
  input signed [7:0] x,
  input [23:0] mantissa,
  (* io_register *) output reg signed [33:0] term
);
  (* io_register *) reg signed [7:0] x_q;
  (* io_register *) reg [23:0] mantissa_q;
  wire signed [8:0] centered = x_q - X_ZERO_POINT;
  wire signed [32:0] product = centered * $signed({1'b0, mantissa_q});
  wire negative = product[32];
  wire [32:0] magnitude = negative ? -product : product;
  wire [32:0] rounded;
  ming_round_to_float32 #(.WIDTH(33)) round(.m(magnitude), .rounded(rounded));
  wire signed [33:0] value = negative ? -$signed({1'b0, rounded}) : $signed({1'b0, rounded});
  always @(posedge clk) begin
    x_q <= x;
    mantissa_q <= mantissa;
    term <= value;
  end
endmodule
