// One MAC lane's product (process/macros.j2 multiply_accumulate): `const int16_t product = x * weight`,
// int8 x int8 -> int16, bound to a DSP48E2 or to LUT fabric by BIND_OP.
module mac_product (
  input clk,
  input signed [7:0] x,
  input signed [7:0] weight,
  (* io_register *) output reg signed [15:0] product
);
  (* io_register *) reg signed [7:0] x_q, weight_q;
  always @(posedge clk) begin
    x_q <= x;
    weight_q <= weight;
    product <= x_q * weight_q;
  end
endmodule
