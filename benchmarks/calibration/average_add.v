// ming::average_add (ming_numerics.h, onnxruntime's QLinearAveragePool over windows, the exact chain of
// numerics.window_average_sum), one step of one lane's chain, in the window's row-major order or down and across
// its columns:
//   sum' = rn24(sum + addend)
// the float32 partial sum in units of 2^exponent, with rn24 the signed round_to_float32 (the magnitude's
// mask-and-add, the sign back); the addend is a term (average_term) or a column's partial sum, which the C++ takes
// at the partial sums' width. The widths are the C++'s at a 3 x 3 window (ming::average_add<9>, the *_BITS below):
// every partial sum is below numerics.window_average_constants' bound, 2 * 9 * 2^32 < 2^37, a 38-bit signed
// register; the sum of two of them 39 bits signed, its magnitude (below 2 * 9 * 2^33) 38 bits, rounded at that
// width and signed again, the 38-bit sum. No product.
// widths: ming::widths::average_add<9>
module average_add #(
  parameter integer SUM_BITS = 38,
  parameter integer TOTAL_BITS = 39,
  parameter integer MAGNITUDE_BITS = 38,
  parameter integer ROUNDED_BITS = 38
) (
  input clk,
  input signed [SUM_BITS - 1:0] sum,
  input signed [SUM_BITS - 1:0] addend,
  (* io_register *) output reg signed [SUM_BITS - 1:0] next
);
  (* io_register *) reg signed [SUM_BITS - 1:0] sum_q;
  (* io_register *) reg signed [SUM_BITS - 1:0] addend_q;
  wire signed [TOTAL_BITS - 1:0] total = sum_q + addend_q;
  wire negative = total[TOTAL_BITS - 1];
  wire [MAGNITUDE_BITS - 1:0] magnitude = negative ? -total : total;
  wire [ROUNDED_BITS - 1:0] rounded;
  ming_round_to_float32 #(.WIDTH(MAGNITUDE_BITS), .ROUNDED(ROUNDED_BITS)) round(.m(magnitude), .rounded(rounded));
  wire signed [ROUNDED_BITS:0] value = negative ? -$signed({1'b0, rounded}) : $signed({1'b0, rounded});
  always @(posedge clk) begin
    sum_q <= sum;
    addend_q <= addend;
    next <= value[SUM_BITS - 1:0];
  end
endmodule
