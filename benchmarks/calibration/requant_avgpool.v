// ming::avgpool_requant (ming_numerics.h, onnxruntime's QLinearAveragePool; emit/templates/epilogues/average.j2),
// one lane: S = window_sum - COUNT * x_zp; y = sat(rne((S * multiplier + (y_zp << SHIFT)) / 2^SHIFT)).
// The count, the zero points, the shift and the output range are constants of the process (parameters, folded;
// epilogues/average_valid.j2 reads the multiplier and the shift per valid count from ROMs instead). The
// multiplier is a constant too, in [2^30, 2^31) by construction (numerics.to_fixed_point): an input here, so the
// figure holds for any value.
module requant_avgpool #(
  parameter integer COUNT = 9,
  parameter integer X_ZERO_POINT = 5,
  parameter integer SHIFT = 34,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [31:0] window_sum,
  input [30:0] multiplier,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] window_sum_q;
  (* io_register *) reg [30:0] multiplier_q;
  wire signed [32:0] centered = window_sum_q - COUNT * X_ZERO_POINT;
  wire signed [64:0] product = centered * $signed({1'b0, multiplier_q});
  wire signed [65:0] total = product + ($signed(ZERO_POINT) <<< SHIFT);
  wire signed [65:0] rounded;
  ming_rne_signed #(.WIDTH(66), .SHIFT(SHIFT)) rne(.value(total), .rounded(rounded));
  always @(posedge clk) begin
    window_sum_q <= window_sum;
    multiplier_q <= multiplier;
    y <= rounded < QMIN ? QMIN : rounded > QMAX ? QMAX : rounded[7:0];
  end
endmodule
