// One MAC lane's sum and accumulator (process/window.cpp.j2, pointwise.cpp.j2):
//   sum[u] += product over TERMS = UNROLL_IC * UNROLL_K int16 products (a balanced tree of adders, each one
//   bit wider than its operands, as HLS sizes them), then acc[u] = (first ? bias : acc[u]) + sum[u] (int32,
//   bias from its ROM, an input here). acc is the lane's own register. TERMS is a power of two here (the cost
//   model interpolates between the points).
module adder_tree #(parameter TERMS = 8) (
  input clk,
  input [TERMS * 16 - 1:0] products,
  input signed [31:0] bias,
  input first,
  output reg signed [31:0] acc
);
  localparam LEVELS = $clog2(TERMS);
  (* io_register *) reg [TERMS * 16 - 1:0] products_q;
  (* io_register *) reg signed [31:0] bias_q;
  (* io_register *) reg first_q;
  genvar k, j;
  generate
    for (k = 0; k <= LEVELS; k = k + 1) begin : level
      wire [(TERMS >> k) * (16 + k) - 1:0] values;  // TERMS / 2^k sums of 16 + k bits
      if (k == 0) begin : leaves
        assign values = products_q;
      end else begin : adders
        for (j = 0; j < (TERMS >> k); j = j + 1) begin : pair
          ming_add #(.WIDTH(15 + k)) add (
            .a(level[k - 1].values[2 * j * (15 + k) +: 15 + k]),
            .b(level[k - 1].values[(2 * j + 1) * (15 + k) +: 15 + k]),
            .sum(values[j * (16 + k) +: 16 + k]));
        end
      end
    end
  endgenerate
  wire signed [15 + LEVELS:0] sum = level[LEVELS].values;
  always @(posedge clk) begin
    products_q <= products;
    bias_q <= bias;
    first_q <= first;
    acc <= (first_q ? bias_q : acc) + sum;
  end
endmodule
