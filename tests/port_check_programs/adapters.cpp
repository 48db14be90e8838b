// The AXI4-Stream adapters of ming_stream.h: images of N values through unpack_axis -> pack_axis in
// tokens of L lanes, printed back.
#include <cstdio>

#include "ming_stream.h"

template <int N, int L>
void round_trip() {
  hls::stream<ming::AxisWord> in("in"), out("out");
  hls::stream<ming::Pack<L>> tokens("tokens");
  hls::stream<ming::ImageFraming> framing("framing");
  constexpr int kWords = ming::AxisFrame<N>::kWords;
  for (int w = 0; w < kWords; w++) {
    ming::AxisWord beat;
    beat.data = 0;
    for (int j = 0; j < ming::kValuesPerWord && w * ming::kValuesPerWord + j < N; j++) {
      beat.data |= static_cast<uint64_t>((w * ming::kValuesPerWord + j) * 5 % 256) << (8 * j);
    }
    beat.keep = beat.strb = 0xFF;
    beat.user = false;
    beat.last = w == kWords - 1;
    in.write(beat);
  }
  ming::unpack_axis<N, L>(in, tokens, framing);
  ming::pack_axis<N, L>(tokens, framing, out);
  unsigned long checksum = 0;
  for (int w = 0; w < kWords; w++) {
    const ming::AxisWord beat = out.read();
    checksum = checksum * 31 + beat.data + beat.keep + (beat.last ? 1 : 0) + (beat.user ? 7 : 0);
  }
  std::printf("%d %d %lu\n", N, L, checksum);
}

int main() {
  round_trip<5, 1>();
  round_trip<24, 3>();
  round_trip<20, 5>();
  round_trip<48, 16>();
  round_trip<36, 12>();
  return 0;
}
