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
// a_mantissa positive, b_mantissa signed (negative for Sub), two 9 x 25-bit products (the C++ takes both as 25-bit
// signed). Each intermediate has the C++'s width (the *_BITS below): ming::add_float_requant<A_ALIGN, B_ALIGN,
// X_SHIFT, bit_length(DIVISOR)> sizes every value by its range at the process's constants. Under the lane loop's
// PIPELINE II=1 every lane has the whole datapath.
// widths: ming::widths::requant_add_float<0, 0, 25, 24>
module requant_add_float #(
  parameter integer A_ZERO_POINT = -128,
  parameter integer B_ZERO_POINT = -62,
  parameter integer A_ALIGN = 0,
  parameter integer B_ALIGN = 0,
  parameter integer X_SHIFT = 25,
  parameter integer DIVISOR = 10000087,
  parameter integer ZERO_POINT = -128,
  parameter integer QMIN = -128,
  parameter integer QMAX = 127,
  parameter integer CENTERED_BITS = 9,
  parameter integer MANTISSA_BITS = 25,
  parameter integer PRODUCT_BITS = 33,
  parameter integer TERM_BITS = 33,
  parameter integer A_ALIGNED_BITS = 33,
  parameter integer B_ALIGNED_BITS = 33,
  parameter integer SUM_BITS = 34,
  parameter integer X_BITS = 34,
  parameter integer MAGNITUDE_BITS = 33,
  parameter integer LIMIT_BITS = 59,
  parameter integer REST_BITS = 59,
  parameter integer DIVISOR_BITS = 24,
  parameter integer UNIT_BITS = 49,
  parameter integer QUOTIENT_BITS = 11,
  parameter integer BAND_BITS = 35,
  parameter integer THRESHOLD_BITS = 49,
  parameter integer LEVEL_BITS = 12
) (
  input clk,
  input signed [7:0] a,
  input signed [7:0] b,
  input signed [MANTISSA_BITS - 1:0] a_mantissa,
  input signed [MANTISSA_BITS - 1:0] b_mantissa,
  (* io_register *) output reg signed [7:0] y
);
  localparam [63:0] D = DIVISOR;
  localparam [63:0] TOP = D << 35;  // quotients from 1024 on saturate
  localparam [63:0] X_LIMIT = (TOP >> X_SHIFT) + 1;
  wire [DIVISOR_BITS - 1:0] divisor = D;
  wire [UNIT_BITS - 1:0] unit = divisor << 25;
  wire [THRESHOLD_BITS - 1:0] half = divisor << 24;
  wire [LIMIT_BITS - 1:0] x_limit = X_LIMIT;
  (* io_register *) reg signed [7:0] a_q, b_q;
  (* io_register *) reg signed [MANTISSA_BITS - 1:0] a_mantissa_q, b_mantissa_q;
  // the two dequantize products, rounded to float32 and aligned
  wire signed [CENTERED_BITS - 1:0] a_centered = a_q - A_ZERO_POINT;
  wire signed [CENTERED_BITS - 1:0] b_centered = b_q - B_ZERO_POINT;
  wire signed [PRODUCT_BITS - 1:0] a_product = a_centered * a_mantissa_q;
  wire signed [PRODUCT_BITS - 1:0] b_product = b_centered * b_mantissa_q;
  wire a_negative = a_product[PRODUCT_BITS - 1], b_negative = b_product[PRODUCT_BITS - 1];
  wire [PRODUCT_BITS - 2:0] a_magnitude = a_negative ? -a_product : a_product;
  wire [PRODUCT_BITS - 2:0] b_magnitude = b_negative ? -b_product : b_product;
  wire [TERM_BITS - 2:0] a_rounded, b_rounded;
  ming_round_to_float32 #(.WIDTH(PRODUCT_BITS - 1), .ROUNDED(TERM_BITS - 1)) a_round(.m(a_magnitude),
                                                                                    .rounded(a_rounded));
  ming_round_to_float32 #(.WIDTH(PRODUCT_BITS - 1), .ROUNDED(TERM_BITS - 1)) b_round(.m(b_magnitude),
                                                                                    .rounded(b_rounded));
  wire signed [A_ALIGNED_BITS - 1:0] da = (a_negative ? -$signed({1'b0, a_rounded}) : $signed({1'b0, a_rounded}))
                                          <<< A_ALIGN;
  wire signed [B_ALIGNED_BITS - 1:0] db = (b_negative ? -$signed({1'b0, b_rounded}) : $signed({1'b0, b_rounded}))
                                          <<< B_ALIGN;
  // the float32 sum X and its magnitude, clamped
  wire signed [SUM_BITS - 1:0] sum = da + db;
  wire sum_negative = sum[SUM_BITS - 1];
  wire [SUM_BITS - 2:0] sum_magnitude = sum_negative ? -sum : sum;
  wire [X_BITS - 2:0] sum_rounded;
  ming_round_to_float32 #(.WIDTH(SUM_BITS - 1), .ROUNDED(X_BITS - 1)) sum_round(.m(sum_magnitude),
                                                                               .rounded(sum_rounded));
  wire x_negative = sum_negative;
  wire [MAGNITUDE_BITS - 1:0] x_magnitude = sum_rounded;
  wire [REST_BITS - 1:0] dividend = (x_magnitude < x_limit ? x_magnitude : x_limit) << X_SHIFT;
  // the restoring division: 10 compare-subtracts, skipped when the quotient saturates
  wire saturated = dividend >= (unit << 10);
  reg [REST_BITS - 1:0] steps_rest;
  reg [QUOTIENT_BITS - 1:0] steps_y0;
  integer bit_index;
  always @* begin
    steps_rest = dividend;
    steps_y0 = 0;
    for (bit_index = 9; bit_index >= 0; bit_index = bit_index - 1)
      if (steps_rest >= ({{(REST_BITS - UNIT_BITS){1'b0}}, unit} << bit_index)) begin
        steps_rest = steps_rest - ({{(REST_BITS - UNIT_BITS){1'b0}}, unit} << bit_index);
        steps_y0 = steps_y0 | (1 << bit_index);
      end
  end
  wire [REST_BITS - 1:0] rest = saturated ? dividend : steps_rest;
  wire [QUOTIENT_BITS - 1:0] y0 = saturated ? 1024 : steps_y0;
  // f32(q) is y0 + 1/2 within the band DIVISOR << bit_length(y0) around DIVISOR << 24
  wire [3:0] length;
  ming_bit_length #(.WIDTH(QUOTIENT_BITS), .OUT(4)) y0_length(.value(y0), .length(length));
  wire [BAND_BITS - 1:0] band = divisor << length;
  wire [THRESHOLD_BITS - 1:0] below = half - band;
  wire [THRESHOLD_BITS - 1:0] above = half + band;
  wire up = !saturated && (y0[0] ? rest >= below : rest > above);
  wire [QUOTIENT_BITS - 1:0] k = y0 + up;
  wire signed [LEVEL_BITS - 1:0] value = (x_negative ? -$signed({1'b0, k}) : $signed({1'b0, k})) + ZERO_POINT;
  always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    a_mantissa_q <= a_mantissa;
    b_mantissa_q <= b_mantissa;
    y <= value < QMIN ? QMIN : value > QMAX ? QMAX : value[7:0];
  end
endmodule
