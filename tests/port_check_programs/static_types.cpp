// ming::Array outside the port check is exactly the plain array type (1 to 4 dimensions, const too);
// under the check, a const array is read through const element references.
#include <type_traits>

#include "ming_stream.h"

#ifndef MING_CHECK_PORTS
static_assert(std::is_same<ming::Array<int8_t, 5>, int8_t[5]>::value, "1 dimension");
static_assert(std::is_same<ming::Array<int32_t, 2, 3>, int32_t[2][3]>::value, "2 dimensions");
static_assert(std::is_same<ming::Array<int8_t, 2, 3, 4>, int8_t[2][3][4]>::value, "3 dimensions");
static_assert(std::is_same<ming::Array<int64_t, 2, 3, 4, 5>, int64_t[2][3][4][5]>::value, "4 dimensions");
static_assert(std::is_same<const ming::Array<int8_t, 2, 3>, const int8_t[2][3]>::value, "a const array");
static_assert(std::is_same<ming::Array<const int8_t, 3>, const int8_t[3]>::value, "const elements");
#endif

static int total(const ming::Array<int8_t, 2, 4>& values) {
  int sum = 0;
  add_rows:
  for (int r = 0; r < 2; r++) {
    HLS_PRAGMA(PIPELINE II=1)
    for (int c = 0; c < 4; c++) {
      HLS_PRAGMA(UNROLL)
      sum += values[r][c];
    }
  }
  return sum;
}

int main() {
  ming::Array<int8_t, 2, 4> values;
  HLS_PRAGMA(ARRAY_PARTITION variable=values type=complete dim=2)
  for (int i = 0; i < 8; i++) values[i / 4][i % 4] = static_cast<int8_t>(i);
  return total(values) == 28 ? 0 : 1;
}
