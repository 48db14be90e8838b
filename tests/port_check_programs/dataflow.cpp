// Two processes over a FIFO, run as the generated dataflow region runs them: one thread each with
// -DMING_CSIM_CONCURRENT, one after the other otherwise. With -DCONFLICT the consumer reads two
// words of an unpartitioned buffer per iteration.
#include <cstdio>

#include "ming_stream.h"

constexpr int kValues = 8;

static void produce(hls::stream<int>& out) {
  produce_values:
  for (int i = 0; i < kValues; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    out.write(i * 3);
  }
}

static void consume(hls::stream<int>& in, hls::stream<int>& out) {
  ming::Array<int32_t, kValues> buffer;
  HLS_PRAGMA(BIND_STORAGE variable=buffer type=ram_2p impl=bram)
#if !defined(CONFLICT)
  int previous = 0;
#endif
  differences:
  for (int i = 0; i < kValues; i++) {
    HLS_PRAGMA(PIPELINE II=1)
    buffer[i] = in.read();
#if defined(CONFLICT)
    out.write(i > 0 ? buffer[i] - buffer[i - 1] : 0);
#else
    out.write(i > 0 ? buffer[i] - previous : 0);
    previous = buffer[i];
#endif
  }
}

static void region(hls::stream<int>& out) {
  HLS_PRAGMA(DATAFLOW)
  hls::stream<int, 2> values("values");
#ifdef MING_CSIM_CONCURRENT
  ming_csim::dataflow({
      {"produce", [&] { produce(values); }},
      {"consume", [&] { consume(values, out); }},
  });
#else
  produce(values);
  consume(values, out);
#endif
}

int main() {
  hls::stream<int> out("differences");
  region(out);
  for (int i = 0; i < kValues; i++) std::printf("%d ", out.read());
  std::printf("\n");
  return 0;
}
