// ming::average_add (ming_numerics.h, onnxruntime's QLinearAveragePool over windows, the exact chain of
// numerics.window_average_sum), one step of one lane's chain, in the window's row-major order:
//   sum' = rn24(sum + term)
// the float32 partial sum in units of 2^exponent, with rn24 the signed round_to_float32 (the magnitude's
// mask-and-add, the sign back). The widths are those of a 3 x 3 window: a term (average_term) is below 2^32 in
// magnitude, 34 bits signed as average_term gives it; every partial sum is below numerics.window_average_constants'
// bound, 2 * 9 * 2^32 < 2^37, so a 38-bit signed register holds it. The sum of the two takes one bit more than
// the wider (39 bits signed), its magnitude is rounded at that width, and the rounded sum, below the bound again,
// is the 38-bit register. No product.
module average_add (
  input clk,
  input signed [37:0] sum,
  input signed [33:0] term,
  (* io_register *) output reg signed [37:0] next
);
  (* io_register *) reg signed [37:0] sum_q;
  (* io_register *) reg signed [33:0] term_q;
  wire signed [38:0] total = sum_q + term_q;
  wire negative = total[38];
  wire [38:0] magnitude = negative ? -total : total;
  wire [38:0] rounded;
  ming_round_to_float32 #(.WIDTH(39)) round(.m(magnitude), .rounded(rounded));
  wire signed [39:0] value = negative ? -$signed({1'b0, rounded}) : $signed({1'b0, rounded});
  always @(posedge clk) begin
    sum_q <= sum;
    term_q <= term;
    next <= value[37:0];
  end
endmodule
