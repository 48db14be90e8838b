// ming::pack_axis (ming_stream.h): tokens of LANES int8 lanes to 64-bit AXI4-Stream words, one token in and one
// word out per cycle at most, through a buffer of HELD = LANES + 7 values. Per iteration: a token is read while
// fewer than 8 values are held, its LANES values stored at `count` onwards; a word (the first 8 values, or the
// image's last ones) is written when 8 are held or the image's values run out, the rest moving down by 8. The
// counters (count, tokens, words, the loop's trip count) and TLAST/TUSER from the image's framing are modelled
// for an image of VALUES int8 values (a whole number of words here); the streams' handshakes are not.
module pack_axis #(parameter LANES = 8, parameter VALUES = 150528) (
  input clk,
  input [LANES * 8 - 1:0] token,
  input framing_error,
  input ends_packet,
  (* io_register *) output reg [63:0] data,
  (* io_register *) output reg data_valid,
  (* io_register *) output reg last,
  (* io_register *) output reg user
);
  localparam HELD = LANES + 7;
  localparam WORDS = (VALUES + 7) / 8;
  localparam LAST_VALUES = VALUES - (WORDS - 1) * 8;
  localparam TOKENS = VALUES / LANES;
  localparam SHARED = LANES < 8 && LAST_VALUES < LANES ? 1 : 0;
  localparam TRIPS = WORDS > TOKENS + SHARED ? WORDS : TOKENS + SHARED;
  localparam COUNT_BITS = $clog2(HELD + 1), TOKEN_BITS = $clog2(TOKENS + 1), WORD_BITS = $clog2(WORDS + 1);
  localparam TRIP_BITS = $clog2(TRIPS + 1);

  (* io_register *) reg [LANES * 8 - 1:0] token_q;
  (* io_register *) reg framing_error_q, ends_packet_q;
  reg [HELD * 8 - 1:0] held;
  reg [COUNT_BITS - 1:0] count;
  reg [TOKEN_BITS - 1:0] tokens;
  reg [WORD_BITS - 1:0] words;
  reg [TRIP_BITS - 1:0] trip;

  wire reading = count < 8 && tokens != TOKENS;
  wire final_word = words == WORDS - 1;
  wire writing = count >= 8 || (reading && count + LANES >= 8) ||
                 ((tokens == TOKENS || (reading && tokens == TOKENS - 1)) && (count > 0 || reading));
  reg [HELD * 8 - 1:0] arrived;  // the buffer after this iteration's token
  reg [63:0] word;
  integer j, v;
  always @* begin
    arrived = held;
    for (j = 0; j < HELD; j = j + 1)
      if (reading && j >= count && j < count + LANES) arrived[j * 8 +: 8] = token_q[(j - count) * 8 +: 8];
    for (v = 0; v < 8; v = v + 1)
      word[v * 8 +: 8] = v < (final_word ? LAST_VALUES : 8) ? arrived[v * 8 +: 8] : 8'd0;
  end
  reg [HELD * 8 - 1:0] moved;  // after the word: held[j] = held[j + 8], the last 8 values stay
  always @* begin
    moved = arrived;
    for (j = 0; j + 8 < HELD; j = j + 1)
      if (writing) moved[j * 8 +: 8] = arrived[(j + 8) * 8 +: 8];
  end
  wire [COUNT_BITS - 1:0] written_values = final_word ? LAST_VALUES : 8;
  wire [COUNT_BITS - 1:0] next_count = count + (reading ? LANES : 0) - (writing ? written_values : 0);

  always @(posedge clk) begin
    token_q <= token;
    framing_error_q <= framing_error;
    ends_packet_q <= ends_packet;
    data_valid <= writing && trip != TRIPS;
    if (trip != TRIPS) begin
      held <= moved;
      count <= next_count;
      trip <= trip + 1'b1;
      if (reading) tokens <= tokens + 1'b1;
      if (writing) words <= words + 1'b1;
      if (writing) begin  // the stream's write
        data <= word;
        last <= final_word && ends_packet_q;
        user <= final_word && framing_error_q;
      end
    end
  end
endmodule
