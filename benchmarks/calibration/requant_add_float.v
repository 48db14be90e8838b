// ming::add_float_requant (ming_numerics.h, onnxruntime's unfused DQ -> Add/Sub -> Q, numerics.add_float_requant;
// emit/templates/epilogues/add.j2 without p.fused: every Sub, and the Adds onnxruntime runs in float), one lane:
//   DA = rn24((a - a_zp) * a_mantissa) << A_ALIGN, DB = rn24((b - b_zp) * b_mantissa) << B_ALIGN (the two float32
//   dequantize products), X = rn24(DA + DB) (the float32 sum); rest = min(|X|, X_LIMIT) << X_SHIFT; the 10-bit
//   quotient y0 = floor(rest / (DIVISOR << 25)) by restoring division, 10 compare-subtracts written out (no loop)
//   and skipped when rest >= DIVISOR << 35 (y0 = 1024); up = the remainder against DIVISOR << 24 -/+ (DIVISOR <<
//   bit_length(y0)) by the parity of y0; y = sat(+-(y0 + up) + ZERO_POINT).
// rn24 is the signed round_to_float32 (the magnitude's mask-and-add, the sign back). The constants of
// numerics.float_add_constants are constants of the process (literals in the C++; parameters here, folded): the
// zero points, the alignments, X_SHIFT, DIVISOR (masked to 50 bits as the C++ does), the output range, and X_LIMIT
// = ((DIVISOR << 35) >> X_SHIFT) + 1 as float_add_constants derives it (a localparam: it takes more than 32 bits).
// The float32 mantissas of the input scales are inputs here, as requant_mul's, so the figure holds for any value:
// a_mantissa positive, b_mantissa signed (negative for Sub), two 9 x 25-bit products. The C++ computes in int64;
// each intermediate here has the width its values take at these constants (a magnitude is rounded with room for
// the rounding's carry). Under the lane loop's PIPELINE II=1 every lane has the whole datapath.
module requant_add_float #(
  parameter integer A_ZERO_POINT = -128,
  parameter integer B_ZERO_POINT = -62,
  parameter integer A_ALIGN = 0,
  parameter integer B_ALIGN = 0,
  parameter integer X_SHIFT = 25,
  parameter integer DIVISOR = 10000087,
  parameter integer ZERO_POINT = -128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input [23:0] a_mantissa,
  input signed [24:0] b_mantissa,
  (* io_register *) output reg signed [7:0] y
);
  localparam [63:0] D = DIVISOR & 64'h3FFFFFFFFFFFF;
  localparam [63:0] UNIT = D << 25;
  localparam [63:0] TOP = UNIT << 10;  // quotients from 1024 on saturate
  localparam [63:0] HALF = D << 24;
  localparam [63:0] X_LIMIT = (TOP >> X_SHIFT) + 1;
  localparam integer WD = 34 + (A_ALIGN > B_ALIGN ? A_ALIGN : B_ALIGN);  // DA, DB (|.| <= 2^32 << align), signed
  localparam integer WX = WD + 1;  // DA + DB, signed; |X| < 2^(WX-1)
  localparam integer WL = $clog2(X_LIMIT + 1);  // min(|X|, X_LIMIT)
  localparam integer WR = WL + X_SHIFT;  // the dividend and the remainder
  localparam integer WB = $clog2(D + 1) + 11;  // DIVISOR << bit_length(y0), y0 <= 1024
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg [23:0] a_mantissa_q;
  (* io_register *) reg signed [24:0] b_mantissa_q;
  // the two dequantize products, rounded to float32 and aligned
  wire signed [8:0] a_centered = a_q - A_ZERO_POINT;
  wire signed [8:0] b_centered = b_q - B_ZERO_POINT;
  wire signed [32:0] a_product = a_centered * $signed({1'b0, a_mantissa_q});
  wire signed [32:0] b_product = b_centered * b_mantissa_q;
  wire a_negative = a_product[32], b_negative = b_product[32];
  wire [32:0] a_magnitude = a_negative ? -a_product : a_product;
  wire [32:0] b_magnitude = b_negative ? -b_product : b_product;
  wire [32:0] a_rounded, b_rounded;
  ming_round_to_float32 #(.WIDTH(33)) a_round(.m(a_magnitude), .rounded(a_rounded));
  ming_round_to_float32 #(.WIDTH(33)) b_round(.m(b_magnitude), .rounded(b_rounded));
  wire signed [WD - 1:0] da = (a_negative ? -$signed({1'b0, a_rounded}) : $signed({1'b0, a_rounded})) <<< A_ALIGN;
  wire signed [WD - 1:0] db = (b_negative ? -$signed({1'b0, b_rounded}) : $signed({1'b0, b_rounded})) <<< B_ALIGN;
  // the float32 sum X and its magnitude, clamped
  wire signed [WX - 1:0] sum;
  ming_add #(.WIDTH(WD)) sum_add(.a(da), .b(db), .sum(sum));
  wire sum_negative = sum[WX - 1];
  wire [WX - 1:0] sum_magnitude = sum_negative ? -sum : sum;
  wire [WX - 1:0] sum_rounded;
  ming_round_to_float32 #(.WIDTH(WX)) sum_round(.m(sum_magnitude), .rounded(sum_rounded));
  wire signed [WX:0] x = sum_negative ? -$signed({1'b0, sum_rounded}) : $signed({1'b0, sum_rounded});
  wire x_negative = x[WX];
  wire [WX:0] x_magnitude = x_negative ? -x : x;
  wire [WR - 1:0] dividend = (x_magnitude < X_LIMIT ? x_magnitude : X_LIMIT) << X_SHIFT;
  // the restoring division: 10 compare-subtracts, skipped when the quotient saturates
  wire saturated = dividend >= TOP;
  reg [WR - 1:0] steps_rest;
  reg [10:0] steps_y0;
  integer bit_index;
  always @* begin
    steps_rest = dividend;
    steps_y0 = 0;
    for (bit_index = 9; bit_index >= 0; bit_index = bit_index - 1)
      if (steps_rest >= (UNIT << bit_index)) begin
        steps_rest = steps_rest - (UNIT << bit_index);
        steps_y0 = steps_y0 | (11'd1 << bit_index);
      end
  end
  wire [WR - 1:0] rest = saturated ? dividend : steps_rest;
  wire [10:0] y0 = saturated ? 11'd1024 : steps_y0;
  // f32(q) is y0 + 1/2 within the band DIVISOR << bit_length(y0) around DIVISOR << 24
  wire [3:0] length;
  ming_bit_length #(.WIDTH(11), .OUT(4)) y0_length(.value(y0), .length(length));
  wire [WB - 1:0] band = D << length;
  wire [WR:0] below = HALF - band;
  wire [WR:0] above = HALF + band;
  wire up = !saturated && (y0[0] ? {1'b0, rest} >= below : {1'b0, rest} > above);
  wire [10:0] k = y0 + up;
  wire signed [12:0] value = (x_negative ? -$signed({2'b0, k}) : $signed({2'b0, k})) + ZERO_POINT;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    a_mantissa_q <= a_mantissa;
    b_mantissa_q <= b_mantissa;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
