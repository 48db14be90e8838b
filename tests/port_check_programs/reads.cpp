// A pipelined loop reading READS_PER_ITERATION elements of a 6x3 table per iteration, row by row.
// The table's layout and storage are chosen with -D: CYCLIC, RESHAPED, REGISTERS, ONE_PORT (default:
// one unpartitioned dual-port memory). ROTATED reads the diagonal (it + j) instead: every iteration's
// reads fall into different banks of the CYCLIC table, but each read site reaches all of them.
#include <cstdio>

#include "ming_stream.h"

#ifndef READS_PER_ITERATION
#define READS_PER_ITERATION 3
#endif

constexpr int kRows = 6, kCols = 3;

static void table_sum(hls::stream<int>& out) {
  ming::Array<int8_t, kRows, kCols> table;
#if defined(CYCLIC)
  HLS_PRAGMA(ARRAY_PARTITION variable=table type=cyclic factor=3 dim=2)
#elif defined(RESHAPED)
  HLS_PRAGMA(ARRAY_RESHAPE variable=table type=complete dim=2)
#elif defined(REGISTERS)
  HLS_PRAGMA(ARRAY_PARTITION variable=table type=complete dim=0)
#endif
#if defined(ONE_PORT)
  HLS_PRAGMA(BIND_STORAGE variable=table type=ram_1p impl=bram)
#else
  HLS_PRAGMA(BIND_STORAGE variable=table type=ram_2p impl=bram)
#endif
  fill:  // not pipelined: its accesses are not counted
  for (int e = 0; e < kRows * kCols; e++) {
    table[e / kCols][e % kCols] = static_cast<int8_t>(e * 7 - 20);
  }
  int sum = 0;
  sum_elements:
  for (int it = 0; it < kRows * kCols / READS_PER_ITERATION; it++) {
    HLS_PRAGMA(PIPELINE II=1)
    for (int j = 0; j < READS_PER_ITERATION; j++) {
      HLS_PRAGMA(UNROLL)
#if defined(ROTATED)
      sum += table[(it + j) % kRows][(it + j) % kCols];
#else
      const int e = it * READS_PER_ITERATION + j;
      sum += table[e / kCols][e % kCols];
#endif
    }
  }
  out.write(sum);
}

int main() {
  hls::stream<int> out("out");
  table_sum(out);
  std::printf("%d\n", out.read());
  return 0;
}
