// The load of weights in URAM (ming_py/weights_load.py): the load loop of a process (emit/templates/process/
// macros.j2, load_weights) and the weight loader's loop over that process's beats (emit/templates/
// load_weights.cpp.j2). Per iteration one 64-bit beat arrives; the loop keeps its trip count, the beat of the
// row (BEATS per row) and the row (ROWS rows), stores the beat's 8 values in the row register at its beat (a
// clock enable per beat) and, with the row's last beat, drives the URAM's write port: the address, the
// BEATS * 64-bit word (the row register with the arriving beat) and the write enable. The loader's loop counts
// the process's ROWS * BEATS beats. The streams' handshakes are not modelled: every beat is there when read.
module weight_load #(parameter BEATS = 1, parameter ROWS = 4096) (
  input clk,
  input [63:0] data,
  (* io_register *) output reg [$clog2(ROWS) - 1:0] address,
  (* io_register *) output reg [BEATS * 64 - 1:0] word,
  (* io_register *) output reg write
);
  localparam TRIPS = ROWS * BEATS;
  localparam TRIP_BITS = $clog2(TRIPS + 1), BEAT_BITS = BEATS > 1 ? $clog2(BEATS) : 1, ROW_BITS = $clog2(ROWS);

  (* io_register *) reg [63:0] data_q;
  reg [TRIP_BITS - 1:0] trip;     // the process's load loop
  reg [TRIP_BITS - 1:0] sent;     // the loader's loop over the process's beats
  reg [BEAT_BITS - 1:0] beat;
  reg [ROW_BITS - 1:0] row;
  reg [BEATS * 64 - 1:0] held;    // the row register

  wire last_beat = BEATS == 1 || beat == BEATS - 1;
  reg [BEATS * 64 - 1:0] arrived;  // the row with this iteration's beat
  integer b;
  always @* begin
    arrived = held;
    for (b = 0; b < BEATS; b = b + 1)
      if (BEATS == 1 || beat == b) arrived[b * 64 +: 64] = data_q;
  end

  always @(posedge clk) begin
    data_q <= data;
    write <= 1'b0;
    if (sent != TRIPS) sent <= sent + 1'b1;
    if (trip != TRIPS) begin
      trip <= trip + 1'b1;
      held <= arrived;
      if (last_beat) begin
        address <= row;
        word <= arrived;
        write <= 1'b1;
        row <= row == ROWS - 1 ? 0 : row + 1'b1;
        beat <= 0;
      end else begin
        beat <= beat + 1'b1;
      end
    end
  end
endmodule
