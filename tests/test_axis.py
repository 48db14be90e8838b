"""The AXI4-Stream adapters of ming_stream.h (unpack_axis / pack_axis) compiled with g++.

One C++ driver instantiates both adapters for a spread of image sizes N (N % 8 != 0, N < 8
included) and lane counts L (dividing 8, multiples of 8 and neither) and checks for each: the
round trip unpack -> pack returns a packet of one or several images; the loops' iteration counts
(counted through the MING_AXIS_ITERATION hook) are max(words, tokens) (pack: plus one when the final
token completes two words); every output word is whole (TKEEP/TSTRB all ones, padding zero); TLAST
closes the output packet where it closed the input packet; a TLAST in the middle of an image reaches
TUSER of that image's last output word.
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
IMAGES = (1, 3)  # images in one packet

DRIVER = r"""
#include <cstdio>
#include <vector>

static long iterations = 0;
#define MING_AXIS_ITERATION() (++iterations)
#include "ming_stream.h"

// `images` images as one packet. framing: 0 TLAST on the packet's last word, 1 no TLAST at all,
// 2 TLAST also on the first word of the first image.
template <int N, int L>
void run(int images, int framing) {
  constexpr int kWords = (N + 7) / 8;
  const int words = images * kWords;
  std::vector<int8_t> values(images * N);
  for (int i = 0; i < images * N; i++) values[i] = static_cast<int8_t>((i * 37 + N * 11 + L) % 256 - 128);
  hls::stream<ming::AxisWord> in("in"), out("out");
  hls::stream<ming::Pack<L>> tokens("tokens");
  hls::stream<ming::ImageFraming> framing_flags("framing");
  for (int w = 0; w < words; w++) {
    const int image = w / kWords, word = w % kWords;
    ming::AxisWord beat;
    beat.data = 0;
    for (int j = 0; j < 8 && 8 * word + j < N; j++)
      beat.data |= static_cast<uint64_t>(static_cast<uint8_t>(values[image * N + 8 * word + j])) << (8 * j);
    beat.keep = beat.strb = 0xFF;
    beat.user = false;
    beat.last = (w == words - 1 && framing != 1) || (w == 0 && framing == 2);
    in.write(beat);
  }
  long unpack_iterations = 0, pack_iterations = 0;
  unsigned long token_count = 0;
  for (int image = 0; image < images; image++) {
    iterations = 0;
    ming::unpack_axis<N, L>(in, tokens, framing_flags);
    unpack_iterations = image == 0 ? iterations : unpack_iterations;
    token_count = image == 0 ? static_cast<unsigned long>(tokens.size()) : token_count;
    iterations = 0;
    ming::pack_axis<N, L>(tokens, framing_flags, out);
    pack_iterations = image == 0 ? iterations : pack_iterations;
  }
  bool same = in.empty() && tokens.empty() && framing_flags.empty() && out.size() == static_cast<size_t>(words);
  int lasts = 0, first_last = -1, users = 0, first_user = -1;
  unsigned keep = 0xFF, strb = 0xFF;
  for (int w = 0; w < words && same; w++) {
    const int image = w / kWords, word = w % kWords;
    const ming::AxisWord beat = out.read();
    for (int j = 0; j < 8; j++) {
      const int8_t value = static_cast<int8_t>((beat.data >> (8 * j)) & 0xFF);
      same = same && value == (8 * word + j < N ? values[image * N + 8 * word + j] : 0);  // padding is zero
    }
    keep &= beat.keep; strb &= beat.strb;
    if (beat.last) { lasts++; first_last = first_last < 0 ? w : first_last; }
    if (beat.user) { users++; first_user = first_user < 0 ? w : first_user; }
  }
  std::printf("%d %d %d %d %d %lu %ld %ld %u %u %d %d %d %d\n", N, L, images, framing, same ? 1 : 0, token_count,
              unpack_iterations, pack_iterations, keep, strb, lasts, first_last, users, first_user);
}

int main() {
@CALLS@
  return 0;
}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[tuple[int, int, int], dict]:
    work = tmp_path_factory.mktemp("axis")
    calls = "\n".join(f"  run<{n}, {lanes}>({images}, {framing});" for n, lanes in CASES for images in IMAGES
                      for framing in (0, 1, 2))
    (work / "axis.cpp").write_text(DRIVER.replace("@CALLS@", calls))
    subprocess.run([CXX, *CXXFLAGS, f"-I{TEMPLATES}", str(work / "axis.cpp"), "-o", str(work / "axis")],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(work / "axis")], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        n, lanes, images, framing, same, tokens, unpack, pack, keep, strb, lasts, first_last, users, first_user = \
            map(int, line.split())
        rows[n, lanes, images, framing] = dict(same=same, tokens=tokens, unpack=unpack, pack=pack, keep=keep,
                                               strb=strb, lasts=lasts, first_last=first_last, users=users,
                                               first_user=first_user)
    assert len(rows) == 3 * len(IMAGES) * len(CASES)
    return rows


@pytest.mark.unit
def test_cases_cover_the_shapes():
    sizes = {n for n, _ in CASES}
    assert any(n < 8 for n in sizes) and any(n % 8 for n in sizes) and any(n % 8 == 0 for n in sizes)
    assert any(n % 8 and lanes > n % 8 and 8 % lanes for n, lanes in CASES)  # the final token completes two words


@pytest.mark.parametrize("images", IMAGES)
@pytest.mark.parametrize("n, lanes", CASES)
def test_round_trip_and_framing(results, n, lanes, images):
    words, tokens = -(-n // 8), n // lanes
    row = results[n, lanes, images, 0]
    assert row["same"] == 1 and row["tokens"] == tokens  # and every padding byte is zero
    assert (row["keep"], row["strb"]) == (0xFF, 0xFF)  # whole words only
    assert (row["lasts"], row["first_last"]) == (1, images * words - 1)  # one packet in, one packet out
    assert row["users"] == 0


@pytest.mark.parametrize("n, lanes", CASES)
def test_one_word_or_token_per_cycle(results, n, lanes):
    words, tokens = -(-n // 8), n // lanes
    row = results[n, lanes, 1, 0]
    assert row["unpack"] == max(words, tokens)
    # words completed by the final token: one write per cycle, so two of them take one more iteration
    completed_last = words - (n - lanes) // 8
    assert row["pack"] == max(words, tokens + completed_last - 1)
    if 8 % lanes == 0 or lanes % 8 == 0:
        assert row["pack"] == max(words, tokens)


@pytest.mark.parametrize("images", IMAGES)
@pytest.mark.parametrize("n, lanes", CASES)
def test_packet_framing_passes_through(results, n, lanes, images):
    """An input packet without TLAST gives output without TLAST (it is not an error: the packet goes on); a
    TLAST in the middle of an image is flagged on that image's last word and does not end its output."""
    words = -(-n // 8)
    missing = results[n, lanes, images, 1]
    assert missing["same"] == 1 and missing["lasts"] == 0 and missing["users"] == 0
    early = results[n, lanes, images, 2]
    assert early["same"] == 1
    if words > 1:
        assert (early["users"], early["first_user"]) == (1, words - 1)
        assert (early["lasts"], early["first_last"]) == (1, images * words - 1)
    else:  # a one-word image: TLAST on its only word ends a packet of that one image
        assert early["users"] == 0 and (early["lasts"], early["first_last"]) == (min(images, 2), 0)
