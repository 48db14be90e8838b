// The load of weights in URAM (ming_py/weights_load.py): the load loop of a process (emit/templates/process/
// macros.j2, load_weights) and the weight loader's loop over that process's beats (emit/templates/
// load_weights.cpp.j2). Per iteration one 64-bit beat arrives; the loop keeps its trip count, the beat of the
// row (BEATS per row) and the row (ROWS rows). A beat before the row's last is stored in the row register at its
// place (a clock enable per beat); the row's last beat drives the URAM's write port: the address, the
// BEATS * 64-bit word (the row register's beats, then the arriving one: each bit has one source) and the write
// enable. The loader's loop counts the process's ROWS * BEATS beats. The streams' handshakes are not modelled:
// every beat is there when read.
module weight_load #(parameter BEATS = 1, parameter ROWS = 4096) (
  input clk,
  input [63:0] data,
  (* io_register *) output reg [$clog2(ROWS) - 1:0] address,
  (* io_register *) output reg [BEATS * 64 - 1:0] word,
  (* io_register *) output reg write
);
  localparam TRIPS = ROWS * BEATS;
  localparam TRIP_BITS = $clog2(TRIPS + 1), BEAT_BITS = BEATS > 1 ? $clog2(BEATS) : 1, ROW_BITS = $clog2(ROWS);
  localparam HELD_BITS = BEATS > 1 ? (BEATS - 1) * 64 : 1;

  (* io_register *) reg [63:0] data_q;
  reg [TRIP_BITS - 1:0] trip;     // the process's load loop
  reg [TRIP_BITS - 1:0] sent;     // the loader's loop over the process's beats
  reg [BEAT_BITS - 1:0] beat;
  reg [ROW_BITS - 1:0] row;
  reg [HELD_BITS - 1:0] held;     // the row register: the beats before the last

  wire last_beat = BEATS == 1 || beat == BEATS - 1;
  integer b;
  always @(posedge clk) begin
    data_q <= data;
    write <= 1'b0;
    if (sent != TRIPS) sent <= sent + 1'b1;
    if (trip != TRIPS) begin
      trip <= trip + 1'b1;
      if (last_beat) begin
        address <= row;
        word <= BEATS > 1 ? {data_q, held[HELD_BITS - 1:0]} : data_q;
        write <= 1'b1;
        row <= row == ROWS - 1 ? 0 : row + 1'b1;
        beat <= 0;
      end else begin
        for (b = 0; b < BEATS - 1; b = b + 1)
          if (beat == b) held[b * 64 +: 64] <= data_q;
        beat <= beat + 1'b1;
      end
    end
  end
endmodule
