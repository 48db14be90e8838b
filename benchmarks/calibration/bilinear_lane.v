// One lane of a bilinear resize process (process/bilinear.cpp.j2 and ming::bilinear in ming_numerics.h, TFLite's
// RESIZE_BILINEAR in integers): the four values read from the line buffer's four banks (row parity x column
// parity) at the pixel's columns, each neighbour chosen from them by the parities of its row and column (four 8-bit
// 4:1 multiplexers), then
//   top = top0 * 1024 + (top1 - top0) * across        (= top0 * wx0 + top1 * wx1, as wx0 + wx1 = 1024: 18 bits)
//   bottom = bottom0 * 1024 + (bottom1 - bottom0) * across
//   sum = top * 1024 + (bottom - top) * down          (the four products of LiteRT's rule: 28 bits)
//   y = (sum + 2^19 - (sum <= 0)) >> 20               (half away from zero, C++'s division toward zero)
// with the column weight `across` = wx1 and the row weight `down` = wy1 (11-bit signed, from the tables' ROMs; the
// model takes them as inputs). Products: two 9 x 11 and one 19 x 11 bits, all signed.
// widths: ming::widths::bilinear_lane
module bilinear_lane #(
  parameter integer WEIGHT_BITS = 11,
  parameter integer STEP_BITS = 9,
  parameter integer ACROSS_PRODUCT_BITS = 19,
  parameter integer ACROSS_BITS = 18,
  parameter integer DOWN_STEP_BITS = 19,
  parameter integer DOWN_PRODUCT_BITS = 29,
  parameter integer SUM_BITS = 28
) (
  input clk,
  input signed [7:0] even_even, even_odd, odd_even, odd_odd,  // banks [row parity][column parity]
  input top_odd, bottom_odd, left_odd, right_odd,             // parities of y0, y1, x0, x1
  input signed [WEIGHT_BITS - 1:0] across, down,                           // wx1, wy1
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [7:0] even_even_q, even_odd_q, odd_even_q, odd_odd_q;
  (* io_register *) reg top_odd_q, bottom_odd_q, left_odd_q, right_odd_q;
  (* io_register *) reg signed [WEIGHT_BITS - 1:0] across_q, down_q;
  always @(posedge clk) begin
    even_even_q <= even_even;
    even_odd_q <= even_odd;
    odd_even_q <= odd_even;
    odd_odd_q <= odd_odd;
    top_odd_q <= top_odd;
    bottom_odd_q <= bottom_odd;
    left_odd_q <= left_odd;
    right_odd_q <= right_odd;
    across_q <= across;
    down_q <= down;
  end
  wire signed [7:0] top0 = top_odd_q ? (left_odd_q ? odd_odd_q : odd_even_q)
                                     : (left_odd_q ? even_odd_q : even_even_q);
  wire signed [7:0] top1 = top_odd_q ? (right_odd_q ? odd_odd_q : odd_even_q)
                                     : (right_odd_q ? even_odd_q : even_even_q);
  wire signed [7:0] bottom0 = bottom_odd_q ? (left_odd_q ? odd_odd_q : odd_even_q)
                                           : (left_odd_q ? even_odd_q : even_even_q);
  wire signed [7:0] bottom1 = bottom_odd_q ? (right_odd_q ? odd_odd_q : odd_even_q)
                                           : (right_odd_q ? even_odd_q : even_even_q);

  wire signed [STEP_BITS:0] top_diff_sum, bottom_diff_sum;
  ming_add #(STEP_BITS) top_diff (.a({top1[7], top1}), .b(-{top0[7], top0}), .sum(top_diff_sum));
  ming_add #(STEP_BITS) bottom_diff (.a({bottom1[7], bottom1}), .b(-{bottom0[7], bottom0}), .sum(bottom_diff_sum));
  wire signed [STEP_BITS - 1:0] top_step = top_diff_sum[STEP_BITS - 1:0];
  wire signed [STEP_BITS - 1:0] bottom_step = bottom_diff_sum[STEP_BITS - 1:0];
  wire signed [ACROSS_PRODUCT_BITS - 1:0] top_product = top_step * across_q;
  wire signed [ACROSS_PRODUCT_BITS - 1:0] bottom_product = bottom_step * across_q;
  wire signed [ACROSS_PRODUCT_BITS:0] top_sum, bottom_sum;
  ming_add #(ACROSS_PRODUCT_BITS) top_add (.a($signed({top0, 10'b0})), .b(top_product), .sum(top_sum));
  ming_add #(ACROSS_PRODUCT_BITS) bottom_add (.a($signed({bottom0, 10'b0})), .b(bottom_product), .sum(bottom_sum));
  wire signed [ACROSS_BITS - 1:0] top = top_sum[ACROSS_BITS - 1:0];  // within 18 bits: a convex combination of int8 values times 1024
  wire signed [ACROSS_BITS - 1:0] bottom = bottom_sum[ACROSS_BITS - 1:0];

  wire signed [DOWN_STEP_BITS:0] down_diff_sum;
  ming_add #(DOWN_STEP_BITS) down_diff (.a({bottom[ACROSS_BITS - 1], bottom}), .b(-{top[ACROSS_BITS - 1], top}),
                                        .sum(down_diff_sum));
  wire signed [DOWN_STEP_BITS - 1:0] down_step = down_diff_sum[DOWN_STEP_BITS - 1:0];
  wire signed [DOWN_PRODUCT_BITS - 1:0] down_product = down_step * down_q;
  wire signed [SUM_BITS:0] sum_wide;
  ming_add #(SUM_BITS) down_add (.a($signed({top, 10'b0})), .b(down_product[SUM_BITS - 1:0]), .sum(sum_wide));
  wire signed [SUM_BITS - 1:0] sum = sum_wide[SUM_BITS - 1:0];  // within 28 bits (the product's carry out is dropped: mod 2^28)
  wire signed [SUM_BITS:0] rounded;
  ming_add #(SUM_BITS) round_add (.a(sum), .b(sum > 0 ? 524288 : 524287), .sum(rounded));
  always @(posedge clk) y <= rounded[SUM_BITS - 1:20];
endmodule
