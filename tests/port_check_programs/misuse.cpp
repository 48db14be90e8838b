// A pragma naming an array that is not the one declared last: a bug of the generated code.
#include "ming_stream.h"

static int misnamed() {
  ming::Array<int32_t, 4> first;
  HLS_PRAGMA(ARRAY_PARTITION variable=first type=complete dim=1)
  ming::Array<int32_t, 4> second;
  HLS_PRAGMA(BIND_STORAGE variable=second type=ram_2p impl=bram)
  HLS_PRAGMA(ARRAY_PARTITION variable=third type=complete dim=1)
  second[0] = 1;
  return first[0] + second[0];
}

int main() { return misnamed() == 1 ? 0 : 1; }
