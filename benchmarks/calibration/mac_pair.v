// ming::multiply_pair (ming_numerics.h, AMD WP486): two int8 products sharing x in one 27 x 8-bit multiply,
//   packed_weights = w_high * 2^18 + w_low (ap_int<27>), product = packed_weights * x (ap_int<34>: at most 2^32 + 2^14),
//   low = the sign-extended low 18 bits, high = (product - low) >> 18 (floor).
// widths: ming::widths::mac_pair
module mac_pair #(
  parameter integer WEIGHTS_BITS = 27,
  parameter integer PRODUCT_BITS = 34,
  parameter integer LOW_BITS = 18,
  parameter integer HIGH_BITS = 16
) (
  input clk,
  input signed [7:0] x,
  input signed [7:0] w_low,
  input signed [7:0] w_high,
  (* io_register *) output reg signed [LOW_BITS - 1:0] low,
  (* io_register *) output reg signed [HIGH_BITS - 1:0] high
);
  (* io_register *) reg signed [7:0] x_q, w_low_q, w_high_q;
  wire signed [WEIGHTS_BITS - 1:0] packed_weights = $signed({w_high_q, 18'b0}) + w_low_q;
  wire signed [PRODUCT_BITS - 1:0] product = packed_weights * x_q;
  wire signed [LOW_BITS - 1:0] low_bits = product[LOW_BITS - 1:0];
  wire signed [PRODUCT_BITS - 1:0] high_bits = (product - low_bits) >>> 18;
  always @(posedge clk) begin
    x_q <= x;
    w_low_q <= w_low;
    w_high_q <= w_high;
    low <= low_bits;
    high <= high_bits[HIGH_BITS - 1:0];
  end
endmodule
