// Stream tokens and pixel transfers shared by every generated process.
#pragma once

#include <cstdint>

#ifdef __SYNTHESIS__
#include <ap_axi_sdata.h>
#include <hls_stream.h>
#else
#include "hls_stream.h"
#endif

// HLS pragmas as _Pragma, so that host compilers (C-simulation) do not warn about them.
#ifdef __SYNTHESIS__
#define MING_PRAGMA_TEXT(x) #x
#define HLS_PRAGMA(x) _Pragma(MING_PRAGMA_TEXT(HLS x))
#else
#define HLS_PRAGMA(x)
// Loop labels name the loops in HLS reports; a host compiler sees them as unused.
#pragma GCC diagnostic ignored "-Wunused-label"
#endif

namespace ming {

// One stream token: `L` int8 channel values of a pixel (channels packed into lanes).
template <int L>
struct Pack {
  int8_t lane[L];
};

#ifdef __SYNTHESIS__
typedef hls::axis<ap_uint<64>, 0, 0, 0> AxisWord;
#else
// C-simulation stand-in with the fields the generated code uses.
struct AxisWord {
  uint64_t data;
  uint8_t keep;
  uint8_t strb;
  bool last;
};
#endif

constexpr int kValuesPerWord = 8;  // int8 values per 64-bit AXI4-Stream word

// Reads the C values of one pixel, arriving as C / L tokens.
template <int C, int L>
void read_pixel(hls::stream<Pack<L>>& in, int8_t pixel[C]) {
  HLS_PRAGMA(INLINE)
  read_tokens:
  for (int t = 0; t < C / L; t++) {
    HLS_PRAGMA(PIPELINE II=1)
    const Pack<L> token = in.read();
    for (int l = 0; l < L; l++) {
      HLS_PRAGMA(UNROLL)
      pixel[t * L + l] = token.lane[l];
    }
  }
}

// Writes the C values of one pixel as C / L tokens.
template <int C, int L>
void write_pixel(hls::stream<Pack<L>>& out, const int8_t pixel[C]) {
  HLS_PRAGMA(INLINE)
  write_tokens:
  for (int t = 0; t < C / L; t++) {
    HLS_PRAGMA(PIPELINE II=1)
    Pack<L> token;
    for (int l = 0; l < L; l++) {
      HLS_PRAGMA(UNROLL)
      token.lane[l] = pixel[t * L + l];
    }
    out.write(token);
  }
}

// AXI4-Stream words (8 values each, little-endian) -> tokens of L lanes.
template <int N, int L>
void unpack_axis(hls::stream<AxisWord>& in, hls::stream<Pack<L>>& out) {
  uint64_t word = 0;
  Pack<L> token = {};
  unpack_values:
  for (int i = 0; i < N; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    if (i % kValuesPerWord == 0) {
      const AxisWord beat = in.read();
      word = static_cast<uint64_t>(beat.data);
    }
    token.lane[i % L] = static_cast<int8_t>((word >> (8 * (i % kValuesPerWord))) & 0xFF);
    if (i % L == L - 1) {
      out.write(token);
    }
  }
}

// Tokens of L lanes -> AXI4-Stream words (8 values each), TLAST on the final word.
template <int N, int L>
void pack_axis(hls::stream<Pack<L>>& in, hls::stream<AxisWord>& out) {
  uint64_t word = 0;
  Pack<L> token = {};
  pack_values:
  for (int i = 0; i < N; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    if (i % L == 0) {
      token = in.read();
    }
    word |= static_cast<uint64_t>(static_cast<uint8_t>(token.lane[i % L])) << (8 * (i % kValuesPerWord));
    if (i % kValuesPerWord == kValuesPerWord - 1 || i == N - 1) {
      AxisWord beat;
      beat.data = word;
      beat.keep = 0xFF;
      beat.strb = 0xFF;
      beat.last = (i == N - 1);
      out.write(beat);
      word = 0;
    }
  }
}

}  // namespace ming
