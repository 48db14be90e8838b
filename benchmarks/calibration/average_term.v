// ming::average_term (ming_numerics.h, onnxruntime's QLinearAveragePool over windows, the exact chain of
// numerics.window_average_terms), one window element of one lane:
//   term = rn24((x - X_ZERO_POINT) * mantissa)
// the float32 sx * (x - zx) in units of 2^exponent (x_scale = mantissa * 2^exponent), with rn24 the signed
// round_to_float32 (the magnitude's mask-and-add, the sign back). The zero point is a constant of the process
// (a parameter, folded). The mantissa is one too, the float32 input scale's 24-bit mantissa in [2^23, 2^24): an
// input here, as requant_add's, so the figure holds for any value. The widths are the C++'s (the *_BITS below):
// x - zx 9 bits signed, the 9 x 24-bit product 33 bits signed (|x - zx| <= 255), its magnitude 32 bits, rounded
// to 24 significant bits (at most 255 * (2^24 - 1) rounded up: below 2^32) and signed again: a 33-bit term.
// widths: ming::widths::average_term
module average_term #(
  parameter integer X_ZERO_POINT = 5,
  parameter integer CENTERED_BITS = 9,
  parameter integer MANTISSA_BITS = 24,
  parameter integer PRODUCT_BITS = 33,
  parameter integer MAGNITUDE_BITS = 32,
  parameter integer ROUNDED_BITS = 32,
  parameter integer TERM_BITS = 33
) (
  input clk,
  input signed [7:0] x,
  input [MANTISSA_BITS - 1:0] mantissa,
  (* io_register *) output reg signed [TERM_BITS - 1:0] term
);
  (* io_register *) reg signed [7:0] x_q;
  (* io_register *) reg [MANTISSA_BITS - 1:0] mantissa_q;
  wire signed [CENTERED_BITS - 1:0] centered = x_q - X_ZERO_POINT;
  wire signed [PRODUCT_BITS - 1:0] product = centered * $signed({1'b0, mantissa_q});
  wire negative = product[PRODUCT_BITS - 1];
  wire [MAGNITUDE_BITS - 1:0] magnitude = negative ? -product : product;
  wire [ROUNDED_BITS - 1:0] rounded;
  ming_round_to_float32 #(.WIDTH(MAGNITUDE_BITS), .ROUNDED(ROUNDED_BITS)) round(.m(magnitude), .rounded(rounded));
  wire signed [TERM_BITS - 1:0] value = negative ? -$signed({1'b0, rounded}) : $signed({1'b0, rounded});
  always @(posedge clk) begin
    x_q <= x;
    mantissa_q <= mantissa;
    term <= value;
  end
endmodule
