// Operators shared by the calibration models (benchmarks/calibrate.py reads this file with each model).

// A signed adder as Vitis HLS instantiates one for each `+` of the C++: its own carry chain. keep_hierarchy
// stops yosys's alumacc from merging a tree of them into one multi-operand $macc, which yosys 0.23 maps to
// carry-save full adders in LUTs (336 LUTs instead of 148 for 8 terms); calibrate.py flattens the design
// after synthesis.
(* keep_hierarchy *)
module ming_add #(parameter WIDTH = 16) (
  input signed [WIDTH-1:0] a,
  input signed [WIDTH-1:0] b,
  output signed [WIDTH:0] sum
);
  assign sum = a + b;
endmodule

// ming::bit_length of an unsigned value: the position of its leading one plus one, 0 for 0.
module ming_bit_length #(parameter WIDTH = 11, parameter OUT = 4) (
  input [WIDTH-1:0] value,
  output reg [OUT-1:0] length
);
  integer i;
  always @* begin
    length = 0;
    for (i = 0; i < WIDTH; i = i + 1)
      if (value[i]) length = i + 1;
  end
endmodule

// ming::round_shift_half_even of a non-negative value by a variable shift: rne(value / 2^shift).
module ming_rne_unsigned #(parameter WIDTH = 32, parameter SHIFT_BITS = 6) (
  input [WIDTH-1:0] value,
  input [SHIFT_BITS-1:0] shift,
  output [WIDTH-1:0] rounded
);
  wire [WIDTH-1:0] quotient = value >> shift;
  wire [WIDTH-1:0] remainder = value & ~({WIDTH{1'b1}} << shift);
  wire [WIDTH:0] half = shift == 0 ? {(WIDTH + 1){1'b0}} : {{WIDTH{1'b0}}, 1'b1} << (shift - 1);
  wire up = shift != 0 && shift <= WIDTH && ({1'b0, remainder} > half || ({1'b0, remainder} == half && quotient[0]));
  assign rounded = quotient + up;
endmodule

// ming::round_shift_half_even of a signed value by a constant shift (floor shift, remainder against one half).
module ming_rne_signed #(parameter WIDTH = 64, parameter SHIFT = 8) (
  input signed [WIDTH-1:0] value,
  output signed [WIDTH-1:0] rounded
);
  generate
    if (SHIFT == 0) begin : none
      assign rounded = value;
    end else begin : shifted
      wire signed [WIDTH-1:0] quotient = value >>> SHIFT;
      wire [SHIFT-1:0] remainder = value[SHIFT-1:0];
      wire [SHIFT-1:0] half = {1'b1, {(SHIFT - 1){1'b0}}};
      wire up = remainder > half || (remainder == half && quotient[0]);
      assign rounded = quotient + up;
    end
  endgenerate
endmodule

// ming::round_to_float32: m rounded to 24 significant bits, half to even, at its own binary point. The bits below
// the 24th are a mask, the smear of the leading one of m >> 24; the rounding is a compare and an add at that mask.
// ming::detail::round_to_float32<MAX> gives the result ROUNDED bits (the rounding's carry can reach bit WIDTH; the
// default keeps WIDTH, the models whose magnitude has a spare bit above its values).
module ming_round_to_float32 #(parameter WIDTH = 56, parameter ROUNDED = WIDTH) (
  input [WIDTH-1:0] m,
  output [ROUNDED-1:0] rounded
);
  reg [WIDTH-1:0] below;
  integer i;
  always @* begin
    below = m >> 24;
    for (i = 1; i < WIDTH; i = i * 2)
      below = below | (below >> i);
  end
  wire [ROUNDED-1:0] unit = below + 1'b1;
  wire [WIDTH-1:0] rest = m & below;
  wire [WIDTH-1:0] kept = m & ~below;
  wire [ROUNDED-1:0] half = unit >> 1;
  wire up = rest != 0 && (rest > half || (rest == half && (kept & unit) != 0));
  assign rounded = kept + (up ? unit : {ROUNDED{1'b0}});
endmodule
