// ming::unpack_axis (ming_stream.h): 64-bit AXI4-Stream words to tokens of LANES int8 lanes, one word in and
// one token out per cycle at most, through a buffer of HELD = LANES + 7 values. Per iteration: a word is read
// while fewer than LANES values are held, its 8 values stored at `count` onwards; a token (the first LANES
// values) is written when LANES are held, the rest moving down by LANES. The counters (count, words, the loop's
// trip count) and the framing flags of ImageFraming are modelled for an image of VALUES int8 values (a whole
// number of words here); the streams' handshakes are not: every word is there when read, every token taken.
module unpack_axis #(parameter LANES = 8, parameter VALUES = 150528) (
  input clk,
  input [63:0] data,
  input last,
  (* io_register *) output reg [LANES * 8 - 1:0] token,
  (* io_register *) output reg token_valid,
  output reg framing_error,
  output reg ends_packet
);
  localparam HELD = LANES + 7;
  localparam WORDS = (VALUES + 7) / 8;
  localparam LAST_VALUES = VALUES - (WORDS - 1) * 8;
  localparam TOKENS = VALUES / LANES;
  localparam TRIPS = WORDS > TOKENS ? WORDS : TOKENS;
  localparam COUNT_BITS = $clog2(HELD + 1), WORD_BITS = $clog2(WORDS + 1), TRIP_BITS = $clog2(TRIPS + 1);

  (* io_register *) reg [63:0] data_q;
  (* io_register *) reg last_q;
  reg [HELD * 8 - 1:0] held;
  reg [COUNT_BITS - 1:0] count;
  reg [WORD_BITS - 1:0] words;
  reg [TRIP_BITS - 1:0] trip;

  wire final_word = words == WORDS - 1;
  wire reading = count < LANES && words != WORDS;
  wire writing = count >= LANES || (reading && ((final_word && count + LAST_VALUES >= LANES) ||
                                                (!final_word && count + 8 >= LANES)));
  reg [HELD * 8 - 1:0] arrived;  // the buffer after this iteration's word
  integer j;
  always @* begin
    arrived = held;
    for (j = 0; j < HELD; j = j + 1)
      if (reading && j >= count && j < count + 8) arrived[j * 8 +: 8] = data_q[(j - count) * 8 +: 8];
  end
  reg [HELD * 8 - 1:0] moved;  // after the token: held[j] = held[j + LANES], the last LANES values stay
  always @* begin
    moved = arrived;
    for (j = 0; j + LANES < HELD; j = j + 1)
      if (writing) moved[j * 8 +: 8] = arrived[(j + LANES) * 8 +: 8];
  end
  wire [COUNT_BITS - 1:0] read_values = final_word ? LAST_VALUES : 8;
  wire [COUNT_BITS - 1:0] next_count = count + (reading ? read_values : 0) - (writing ? LANES : 0);

  always @(posedge clk) begin
    data_q <= data;
    last_q <= last;
    token_valid <= writing && trip != TRIPS;
    if (trip != TRIPS) begin
      held <= moved;
      count <= next_count;
      trip <= trip + 1'b1;
      if (reading) begin
        words <= words + 1'b1;
        framing_error <= framing_error | (last_q && !final_word);
        ends_packet <= last_q && final_word;
      end
      if (writing) token <= arrived[LANES * 8 - 1:0];  // the stream's write
    end
  end
endmodule
