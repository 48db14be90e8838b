// A histogram: every iteration reads and writes one bin (a read-modify-write, 2 accesses).
// -DSTORAGE_1P, -DSTORAGE_S2P choose the bins' storage (default ram_2p).
#include <cstdio>

#include "ming_stream.h"

constexpr int kBins = 4, kValues = 10;

static void histogram(hls::stream<int>& in, hls::stream<int>& out) {
  ming::Array<int32_t, kBins> bins = {};
#if defined(STORAGE_1P)
  HLS_PRAGMA(BIND_STORAGE variable=bins type=ram_1p impl=bram)
#elif defined(STORAGE_S2P)
  HLS_PRAGMA(BIND_STORAGE variable=bins type=ram_s2p impl=lutram)
#else
  HLS_PRAGMA(BIND_STORAGE variable=bins type=ram_2p impl=bram)
#endif
  count_values:
  for (int it = 0; it < kValues; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    bins[in.read() % kBins] += 1;
  }
  write_bins:
  for (int b = 0; b < kBins; b++) {
    HLS_PRAGMA(PIPELINE II=1)
    out.write(bins[b]);
  }
}

int main() {
  hls::stream<int> in("in"), out("out");
  for (int v = 0; v < kValues; v++) in.write(v * v);
  histogram(in, out);
  for (int b = 0; b < kBins; b++) std::printf("%d ", out.read());
  std::printf("\n");
  return 0;
}
