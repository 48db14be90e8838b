// ming::requantize_shift (ming_numerics.h) on total + offset (emit/templates/epilogues/shift.j2), one lane:
//   y = sat(rne((acc + OFFSET) / 2^SHIFT) + ZERO_POINT), every constant one of the process: the rounding shift
//   is wiring, a compare of the bits shifted out with one half and an increment. The widths are the C++'s (the
//   *_BITS below): the process adds the offset in int32, the function rounds the int32 and adds the zero point.
// widths: ming::widths::requant_shift
module requant_shift #(
  parameter SHIFT = 4,
  parameter integer OFFSET = 1152,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer ACC_BITS = 32,
  parameter integer LEVEL_BITS = 33
) (
  input clk,
  input signed [ACC_BITS - 1:0] acc,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [ACC_BITS - 1:0] acc_q;
  wire signed [ACC_BITS - 1:0] offset_acc = acc_q + OFFSET;
  wire signed [ACC_BITS - 1:0] rounded;
  ming_rne_signed #(.WIDTH(ACC_BITS), .SHIFT(SHIFT)) rne(.value(offset_acc), .rounded(rounded));
  wire signed [LEVEL_BITS - 1:0] value = rounded + ZERO_POINT;
  always @(posedge clk) begin
    acc_q <= acc;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
