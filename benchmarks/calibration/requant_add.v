// ming::add_requant (ming_numerics.h, onnxruntime's QLinearAdd; emit/templates/epilogues/add.j2), one lane:
//   v = ma * (a - a_zp) + mb * (b - b_zp) + (y_zp << SHIFT); y = sat(rne(v / 2^SHIFT)).
// The zero points, the shift and the output range are constants of the process (parameters, folded). The
// multipliers are constants of the process too, full-width by construction (numerics.add_fixed_points: the
// larger in [2^30, 2^31), Sub negates mb): inputs here, so the figure holds for any value.
module requant_add #(
  parameter integer A_ZERO_POINT = 5,
  parameter integer B_ZERO_POINT = -7,
  parameter integer SHIFT = 31,
  parameter integer ZERO_POINT = -3,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input signed [31:0] a_multiplier,
  input signed [31:0] b_multiplier,
  (* io_register *) output reg signed [7:0] y
);
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg signed [31:0] a_multiplier_q, b_multiplier_q;
  wire signed [8:0] a_centered = a_q - A_ZERO_POINT;
  wire signed [8:0] b_centered = b_q - B_ZERO_POINT;
  wire signed [40:0] a_term = a_multiplier_q * a_centered;
  wire signed [40:0] b_term = b_multiplier_q * b_centered;
  wire signed [41:0] terms;
  ming_add #(.WIDTH(41)) terms_add(.a(a_term), .b(b_term), .sum(terms));
  localparam integer WIDTH = (SHIFT + 9 > 43 ? SHIFT + 9 : 43);
  wire signed [WIDTH - 1:0] total = terms + ($signed(ZERO_POINT) <<< SHIFT);
  wire signed [WIDTH - 1:0] rounded;
  ming_rne_signed #(.WIDTH(WIDTH), .SHIFT(SHIFT)) rne(.value(total), .rounded(rounded));
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    a_multiplier_q <= a_multiplier;
    b_multiplier_q <= b_multiplier;
    y <= rounded < QMIN ? QMIN : rounded > QMAX ? QMAX : rounded[7:0];
  end
endmodule
