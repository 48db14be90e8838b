// ming::multiply_pair (ming_numerics.h, AMD WP486): two int8 products sharing x in one 27 x 8-bit multiply,
//   packed_weights = w_high * 2^18 + w_low (ap_int<27>), product = packed_weights * x (ap_int<35>),
//   low = the sign-extended low 18 bits, high = (product - low) >> 18 (floor).
module mac_pair (
  input clk,
  input signed [7:0] x,
  input signed [7:0] w_low,
  input signed [7:0] w_high,
  (* io_register *) output reg signed [17:0] low,
  (* io_register *) output reg signed [16:0] high
);
  (* io_register *) reg signed [7:0] x_q, w_low_q, w_high_q;
  wire signed [26:0] packed_weights = $signed({w_high_q, 18'b0}) + w_low_q;
  wire signed [34:0] product = packed_weights * x_q;
  wire signed [17:0] low_bits = product[17:0];
  wire signed [34:0] high_bits = (product - low_bits) >>> 18;
  always @(posedge clk) begin
    x_q <= x;
    w_low_q <= w_low;
    w_high_q <= w_high;
    low <= low_bits;
    high <= high_bits[16:0];
  end
endmodule
