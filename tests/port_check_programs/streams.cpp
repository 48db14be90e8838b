// Pairs of values summed in a pipelined loop: one read per iteration over twice the iterations, or
// (-DTWO_READS) two reads of the same stream in one iteration.
#include <cstdio>

#include "ming_stream.h"

constexpr int kPairs = 3;

static void pair_sums(hls::stream<int>& in, hls::stream<int>& out) {
#if defined(TWO_READS)
  add_pairs:
  for (int it = 0; it < kPairs; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    const int first = in.read();
    out.write(first + in.read());
  }
#else
  int first = 0;
  add_pairs:
  for (int it = 0; it < 2 * kPairs; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    const int value = in.read();
    if (it % 2 == 1) out.write(first + value);
    first = value;
  }
#endif
}

int main() {
  hls::stream<int> in("in"), out("sums");
  for (int v = 0; v < 2 * kPairs; v++) in.write(v + 1);
  pair_sums(in, out);
  for (int p = 0; p < kPairs; p++) std::printf("%d ", out.read());
  std::printf("\n");
  return 0;
}
