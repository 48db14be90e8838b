// ming::requantize_shift (ming_numerics.h) on total + offset (emit/templates/epilogues/shift.j2), one lane:
//   y = sat(rne((acc + OFFSET) / 2^SHIFT) + ZERO_POINT), every constant one of the process: the rounding shift
//   is wiring, a compare of the bits shifted out with one half and an increment.
module requant_shift #(
  parameter SHIFT = 4,
  parameter integer OFFSET = 1152,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [31:0] acc,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [31:0] acc_q;
  wire signed [32:0] offset_acc = acc_q + OFFSET;
  wire signed [32:0] rounded;
  ming_rne_signed #(.WIDTH(33), .SHIFT(SHIFT)) rne(.value(offset_acc), .rounded(rounded));
  wire signed [33:0] value = rounded + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
