// A matrix-vector product over a constant table, one row of 3 weights per iteration: the weights'
// ARRAY_RESHAPE makes a row one word (-DUNSHAPED leaves 3 words of one dual-port ROM).
#include <cstdio>

#include "ming_stream.h"
#include "rom_weights.h"

static void products(hls::stream<int>& in, hls::stream<int>& out) {
#if !defined(UNSHAPED)
  HLS_PRAGMA(ARRAY_RESHAPE variable=weights_demo type=complete dim=2)
#endif
  HLS_PRAGMA(BIND_STORAGE variable=weights_demo type=rom_2p impl=bram)
  ming::Array<int8_t, 3> x;
  HLS_PRAGMA(ARRAY_PARTITION variable=x type=complete dim=1)
  read_vector:
  for (int i = 0; i < 3; i++) {
    x[i] = static_cast<int8_t>(in.read());
  }
  rows:
  for (int r = 0; r < 4; r++) {
    HLS_PRAGMA(PIPELINE II=1)
    int sum = 0;
    for (int c = 0; c < 3; c++) {
      HLS_PRAGMA(UNROLL)
      sum += x[c] * weights_demo[r][c];
    }
    out.write(sum);
  }
}

int main() {
  hls::stream<int> in("in"), out("out");
  for (int v = 0; v < 3; v++) in.write(v + 2);
  products(in, out);
  for (int r = 0; r < 4; r++) std::printf("%d ", out.read());
  std::printf("\n");
  return 0;
}
