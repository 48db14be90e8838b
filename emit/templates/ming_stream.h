// Stream tokens and pixel transfers shared by every generated process.
#pragma once

#include <cstdint>

#include "ming_widths.h"

// MING_CSIM (defined by `ming csim` only) selects ming's stand-ins for g++; Vitis csim, cosim and
// synthesis, which never define it, get the real hls::stream and hls::axis.
#ifdef MING_CSIM
#include <cstdio>
#include <cstdlib>

#include "ming_hls_stream.h"
#else
#include <ap_axi_sdata.h>
#include <ap_int.h>
#include <hls_stream.h>
#endif

// HLS pragmas as _Pragma for Vitis; `ming csim` drops them, or runs them as the port check
// (MING_CHECK_PORTS): see ming_check.h.
#if defined(MING_CHECK_PORTS)
#include "ming_check.h"
#define HLS_PRAGMA(x) MING_CHECK_PRAGMA(x)
#elif defined(MING_CSIM)
#define HLS_PRAGMA(x)
#else
#define MING_PRAGMA_TEXT(x) #x
#define HLS_PRAGMA(x) _Pragma(MING_PRAGMA_TEXT(HLS x))
#endif
#ifndef __SYNTHESIS__
// Loop labels name the loops in HLS reports; a host compiler sees them as unused.
#pragma GCC diagnostic ignored "-Wunused-label"
#endif

// Called once per iteration of the AXI adapters' loops; tests define it to count iterations.
#ifndef MING_AXIS_ITERATION
#define MING_AXIS_ITERATION()
#endif

namespace ming {

// Counters, indices and predicates carried from one iteration of a pipelined loop to the next are
// registers with the logic computing their next value: each gets the width of its range,
// ming::uint_for<MAX> for 0..MAX (ming_widths.h: ap_uint of that width under Vitis, a checked class in csim);
// ming::Counter<MAX> is the same, or for MAX = 0 the constant 0, no register.

// ming::Array<T, N0, N1, ...> is the plain array T[N0][N1]...; the port check makes it a class that
// counts the accesses to each bank (ming_check::Array). Declare a local array as one, followed by its
// pragmas, each naming it.
template <typename T, int... N>
struct ArrayOf {
  using type = T;
};
template <typename T, int N0, int... Rest>
struct ArrayOf<T, N0, Rest...> {
  using type = typename ArrayOf<T, Rest...>::type[N0];
};
#ifdef MING_CHECK_PORTS
template <typename T, int... N>
using Array = ming_check::Array<T, N...>;
#else
template <typename T, int... N>
using Array = typename ArrayOf<T, N...>::type;
#endif

// One stream token: `L` int8 channel values of a pixel (channels packed into lanes).
template <int L>
struct Pack {
  int8_t lane[L];
};

// TUSER (1 bit) flags an image whose input framing was wrong; see pack_axis.
#ifndef MING_CSIM
typedef hls::axis<ap_uint<64>, 1, 0, 0> AxisWord;
#else
// C-simulation stand-in with the fields the generated code uses.
struct AxisWord {
  uint64_t data;
  uint8_t keep;
  uint8_t strb;
  bool user;
  bool last;
};
#endif

constexpr int kValuesPerWord = 8;  // int8 values per 64-bit AXI4-Stream word
constexpr uint8_t kWholeWord = 0xFF;  // TKEEP/TSTRB of a word: every byte is data or zero padding

// How an image was framed on the input stream, passed from unpack_axis to pack_axis.
struct ImageFraming {
  bool ends_packet;  // TLAST on the image's last word: more images may follow in the packet otherwise
  bool error;        // TLAST on a word before the image's last
};

// The AXI4-Stream words of an image of N int8 values: 8 values each, little-endian, the last one
// holding the remaining 1-8 values.
template <int N>
struct AxisFrame {
  static constexpr int kWords = (N + kValuesPerWord - 1) / kValuesPerWord;
  static constexpr int kLastValues = N - (kWords - 1) * kValuesPerWord;
};

// AXI4-Stream words -> tokens of L lanes, one word in and one token out per cycle at most.
// A small value buffer bridges the two widths (any L, dividing 8 or not): a word is read
// whenever fewer than L values are held, a token written whenever L are. The loop runs
// max(words, tokens) iterations: tokens set the pace for L < 8, words for L > 8.
// A packet (words up to TLAST) holds a whole number of images: one DMA transfer carries a batch.
// `framing` (one entry per image, written after its last word) tells pack_axis whether the image
// ends its packet and whether TLAST came in the middle of it. TKEEP is not checked: the values
// past N in an image's last word are padding.
template <int N, int L>
void unpack_axis(hls::stream<AxisWord>& in, hls::stream<Pack<L>>& out, hls::stream<ImageFraming>& framing) {
  static_assert(N % L == 0, "an image is a whole number of tokens");
  constexpr int kWords = AxisFrame<N>::kWords;
  constexpr int kLastValues = AxisFrame<N>::kLastValues;
  constexpr int kTokens = N / L;
  constexpr int kTrips = kWords > kTokens ? kWords : kTokens;
  constexpr int kHeld = L - 1 + kValuesPerWord;  // at most L - 1 values wait when a word arrives
  ming::Array<int8_t, kHeld> held = {};
  HLS_PRAGMA(ARRAY_PARTITION variable=held type=complete)
  uint_for<kHeld> count = 0;  // values in `held`
  uint_for<kWords> words = 0;
  ImageFraming image = {false, false};
  unpack_words:
  for (uint_for<kTrips> i = 0; i < kTrips; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    MING_AXIS_ITERATION();
    // From this iteration's registers: a word arrives, a token leaves (counting the word's values).
    const bool final_word = words == kWords - 1;
    const bool reading = count < L && words != kWords;
    const bool writing = count >= L || (reading && ((final_word && count >= L - kLastValues) ||
                                                    (!final_word && count >= L - kValuesPerWord)));
    if (reading) {
      const AxisWord beat = in.read();
      const uint64_t data = static_cast<uint64_t>(beat.data);
      image.error |= static_cast<bool>(beat.last) && !final_word;
      image.ends_packet = static_cast<bool>(beat.last) && final_word;
      for (int j = 0; j < kHeld; j++) {
        HLS_PRAGMA(UNROLL)
        const int v = j - static_cast<int>(count);
        if (v >= 0 && v < kValuesPerWord) {
          held[j] = static_cast<int8_t>((data >> (8 * v)) & 0xFF);
        }
      }
      words++;
    }
    if (writing) {
      Pack<L> token;
      for (int l = 0; l < L; l++) {
        HLS_PRAGMA(UNROLL)
        token.lane[l] = held[l];
      }
      for (int j = 0; j + L < kHeld; j++) {
        HLS_PRAGMA(UNROLL)
        held[j] = held[j + L];
      }
      out.write(token);
    }
    count += reading ? (writing ? (final_word ? kLastValues - L : kValuesPerWord - L)
                                : (final_word ? kLastValues : kValuesPerWord))
                     : (writing ? -L : 0);
  }
  framing.write(image);
}

// Tokens of L lanes -> AXI4-Stream words, one token in and one word out per cycle at most.
// A token is read whenever fewer than 8 values are held, a word written whenever 8 are (or the
// image's remaining values). The loop runs max(words, tokens) iterations, plus one when the
// final token completes two words (L < 8 not dividing 8 and a last word shorter than L): one
// write per cycle. Every word is whole (TKEEP/TSTRB all ones, the padding of an image's last
// word zero): AXI DMA S2MM without realignment takes null bytes on a packet's last beat only.
// The image's last word carries TLAST when its input image ended a packet (one output packet
// per input packet) and TUSER when its input was framed wrongly (see unpack_axis). A model with
// several outputs sends an image's outputs one after the other: all but the last of them are
// written with kEndsRecord false (no TLAST or TUSER; the last one reads `framing`).
template <int N, int L, bool kEndsRecord = true>
void pack_axis(hls::stream<Pack<L>>& in, hls::stream<ImageFraming>& framing, hls::stream<AxisWord>& out) {
  static_assert(N % L == 0, "an image is a whole number of tokens");
  constexpr int kWords = AxisFrame<N>::kWords;
  constexpr int kLastValues = AxisFrame<N>::kLastValues;
  constexpr int kTokens = N / L;
  constexpr int kShared = L < kValuesPerWord && kLastValues < L ? 1 : 0;
  constexpr int kTrips = kWords > kTokens + kShared ? kWords : kTokens + kShared;
  constexpr int kHeld = kValuesPerWord - 1 + L;  // at most 7 values wait when a token arrives
  ming::Array<int8_t, kHeld> held = {};
  HLS_PRAGMA(ARRAY_PARTITION variable=held type=complete)
  uint_for<kHeld> count = 0;  // values in `held`
  uint_for<kTokens> tokens = 0;
  uint_for<kWords> words = 0;
  pack_words:
  for (uint_for<kTrips> i = 0; i < kTrips; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    MING_AXIS_ITERATION();
    // From this iteration's registers: a token arrives, a word leaves (counting the token's values): eight
    // values, or the image's last ones.
    const bool reading = count < kValuesPerWord && tokens != kTokens;
    const bool final_word = words == kWords - 1;
    const bool writing = count >= kValuesPerWord || (reading && count >= kValuesPerWord - L) ||
                         ((tokens == kTokens || (reading && tokens == kTokens - 1)) && (count > 0 || reading));
    if (reading) {
      const Pack<L> token = in.read();
      for (int j = 0; j < kHeld; j++) {
        HLS_PRAGMA(UNROLL)
        const int l = j - static_cast<int>(count);
        if (l >= 0 && l < L) {
          held[j] = token.lane[l];
        }
      }
      tokens++;
    }
    if (writing) {
      const int valid = final_word ? kLastValues : kValuesPerWord;
      uint64_t data = 0;
      for (int v = 0; v < kValuesPerWord; v++) {
        HLS_PRAGMA(UNROLL)
        if (v < valid) {
          data |= static_cast<uint64_t>(static_cast<uint8_t>(held[v])) << (8 * v);
        }
      }
      for (int j = 0; j + kValuesPerWord < kHeld; j++) {
        HLS_PRAGMA(UNROLL)
        held[j] = held[j + kValuesPerWord];
      }
      words++;
      ImageFraming image = {false, false};
      if (kEndsRecord && final_word) {
        image = framing.read();
      }
      AxisWord beat;
      beat.data = data;
      beat.keep = kWholeWord;
      beat.strb = kWholeWord;
      beat.user = image.error;
      beat.last = image.ends_packet;
      out.write(beat);
    }
    count += reading ? (writing ? (final_word ? L - kLastValues : L - kValuesPerWord) : L)
                     : (writing ? (final_word ? -kLastValues : -kValuesPerWord) : 0);
  }
}

}  // namespace ming
