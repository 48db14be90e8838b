"""The AXI4-Stream adapters of ming_stream.h (unpack_axis / pack_axis) compiled with g++.

One C++ driver instantiates both adapters for a spread of image sizes N (N % 8 != 0, N < 8
included) and lane counts L (dividing 8, multiples of 8 and neither) and checks for each: the
round trip unpack -> pack returns the image; the loops' iteration counts (counted through the
MING_AXIS_ITERATION hook) are max(words, tokens) (pack: plus one when the final token completes
two words); TKEEP/TSTRB mark exactly the valid values of the last word; TLAST is on the last word
only; a missing or early input TLAST raises the framing error, which reaches TUSER of the last
output word.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).parents[1] / "emit" / "templates"
CXX = shutil.which("g++")
CXXFLAGS = ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Wconversion", "-Wshadow", "-Werror", "-DMING_CSIM"]

pytestmark = pytest.mark.skipif(CXX is None, reason="g++ not available")

LANES = [1, 2, 3, 4, 5, 6, 8, 12, 16, 24]
PIXELS = [1, 2, 3, 5, 7, 16]


def _cases() -> list[tuple[int, int]]:
    """(N, L): L lanes divide the C channels of a pixel, N = C x pixels."""
    cases = set()
    for lanes in LANES:
        for tiles in (1, 2, 3):
            for pixels in PIXELS:
                cases.add((lanes * tiles * pixels, lanes))
    return sorted(cases)


CASES = _cases()

DRIVER = r"""
#include <cstdio>
#include <vector>

static long iterations = 0;
#define MING_AXIS_ITERATION() (++iterations)
#include "ming_stream.h"

// framing: 0 correct, 1 TLAST missing on the last word, 2 TLAST also on the first word
template <int N, int L>
void run(int framing) {
  constexpr int kWords = (N + 7) / 8;
  std::vector<int8_t> image(N);
  for (int i = 0; i < N; i++) image[i] = static_cast<int8_t>((i * 37 + N * 11 + L) % 256 - 128);
  hls::stream<ming::AxisWord> in("in"), out("out");
  hls::stream<ming::Pack<L>> tokens("tokens");
  hls::stream<bool> framing_error("framing_error");
  for (int w = 0; w < kWords; w++) {
    ming::AxisWord beat;
    beat.data = 0;
    for (int j = 0; j < 8 && 8 * w + j < N; j++)
      beat.data |= static_cast<uint64_t>(static_cast<uint8_t>(image[8 * w + j])) << (8 * j);
    beat.keep = beat.strb = 0xFF;
    beat.user = false;
    beat.last = (w == kWords - 1 && framing != 1) || (w == 0 && framing == 2);
    in.write(beat);
  }
  iterations = 0;
  ming::unpack_axis<N, L>(in, tokens, framing_error);
  const long unpack_iterations = iterations;
  const unsigned long token_count = static_cast<unsigned long>(tokens.size());
  iterations = 0;
  ming::pack_axis<N, L>(tokens, framing_error, out);
  const long pack_iterations = iterations;
  bool same = in.empty() && tokens.empty() && framing_error.empty() && out.size() == kWords;
  int lasts = 0, user = 0;
  unsigned keep_last = 0, strb_last = 0, keep_other = 0xFF, strb_other = 0xFF;
  for (int w = 0; w < kWords && same; w++) {
    const ming::AxisWord beat = out.read();
    for (int j = 0; j < 8 && 8 * w + j < N; j++)
      same = same && static_cast<int8_t>((beat.data >> (8 * j)) & 0xFF) == image[8 * w + j];
    if (w == kWords - 1) {
      keep_last = beat.keep; strb_last = beat.strb; user = beat.user;
      lasts += beat.last ? 1 : 0;
    } else {
      keep_other &= beat.keep; strb_other &= beat.strb;
      lasts += beat.last ? 100 : 0;  // an early TLAST shows as >= 100
      same = same && !beat.user;
    }
  }
  std::printf("%d %d %d %d %lu %ld %ld %u %u %u %u %d %d\n", N, L, framing, same ? 1 : 0, token_count,
              unpack_iterations, pack_iterations, keep_last, strb_last, keep_other, strb_other, lasts, user);
}

int main() {
@CALLS@
  return 0;
}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[int, int, int], dict]:
    work = tmp_path_factory.mktemp("axis")
    calls = "\n".join(f"  run<{n}, {lanes}>({framing});" for n, lanes in CASES for framing in (0, 1, 2))
    (work / "axis.cpp").write_text(DRIVER.replace("@CALLS@", calls))
    subprocess.run([CXX, *CXXFLAGS, f"-I{TEMPLATES}", str(work / "axis.cpp"), "-o", str(work / "axis")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(work / "axis")], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        n, lanes, framing, same, tokens, unpack, pack, keep, strb, keep_other, strb_other, lasts, user = \
            map(int, line.split())
        rows[n, lanes, framing] = dict(same=same, tokens=tokens, unpack=unpack, pack=pack, keep=keep, strb=strb,
                                       keep_other=keep_other, strb_other=strb_other, lasts=lasts, user=user)
    assert len(rows) == 3 * len(CASES)
    return rows


def test_cases_cover_the_shapes():
    sizes = {n for n, _ in CASES}
    assert any(n < 8 for n in sizes) and any(n % 8 for n in sizes) and any(n % 8 == 0 for n in sizes)
    assert any(n % 8 and lanes > n % 8 and 8 % lanes for n, lanes in CASES)  # the final token completes two words


@pytest.mark.parametrize("n, lanes", CASES)
def test_round_trip_and_framing(results, n, lanes):
    words, tokens = -(-n // 8), n // lanes
    row = results[n, lanes, 0]
    assert row["same"] == 1 and row["tokens"] == tokens
    valid = n - 8 * (words - 1)
    assert (row["keep"], row["strb"]) == ((1 << valid) - 1, (1 << valid) - 1)
    if words > 1:
        assert (row["keep_other"], row["strb_other"]) == (0xFF, 0xFF)
    assert row["lasts"] == 1  # TLAST on the last word and on no other
    assert row["user"] == 0


@pytest.mark.parametrize("n, lanes", CASES)
def test_one_word_or_token_per_cycle(results, n, lanes):
    words, tokens = -(-n // 8), n // lanes
    row = results[n, lanes, 0]
    assert row["unpack"] == max(words, tokens)
    # words completed by the final token: one write per cycle, so two of them take one more iteration
    completed_last = words - (n - lanes) // 8
    assert row["pack"] == max(words, tokens + completed_last - 1)
    if 8 % lanes == 0 or lanes % 8 == 0:
        assert row["pack"] == max(words, tokens)


@pytest.mark.parametrize("n, lanes", CASES)
def test_wrong_input_tlast_is_flagged(results, n, lanes):
    words = -(-n // 8)
    missing = results[n, lanes, 1]
    assert missing["same"] == 1 and missing["user"] == 1 and missing["lasts"] == 1
    if words > 1:
        early = results[n, lanes, 2]
        assert early["same"] == 1 and early["user"] == 1 and early["lasts"] == 1
