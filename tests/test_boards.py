"""The board database: every shipped board loads, figures are sane, bad files are rejected."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from ming_py.boards import (PROCESSING_SYSTEMS_FILE, Board, all_boards, board_names, boards_table, load_board,
                             parse_board, processing_systems)
from ming_py.errors import MingError

pytestmark = pytest.mark.unit

EXPECTED = ["kv260", "pynq-z2", "u250", "u280", "u50", "u55c", "ultra96v2", "zcu102", "zcu104"]

GOOD = """\
name = "demo"
part = "xczu3eg-sbva484-1-i"
family = "Zynq UltraScale+ MPSoC"
dsp = 360
bram18k = 432
uram = 0
lut = 70560
ff = 141120
clock_mhz = 200
interface = "zynq_axis_dma"
source = "DS891, XCZU3EG"

[zynq]
board_part = "avnet.com:ultra96v2:part0:1.2"
processing_system = "zynq_ultra_ps_e"
pl_clock_max_mhz = 250
pynq = "PYNQ v3.0"
"""


def _with(line_key: str, new_line: str | None) -> str:
    """GOOD with the line for `line_key` replaced by `new_line` (or dropped when None)."""
    out = []
    for line in GOOD.splitlines():
        if line.split("=")[0].strip() == line_key:
            if new_line is not None:
                out.append(new_line)
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_all_boards_load():
    assert board_names() == EXPECTED
    boards = all_boards()
    assert [b.name for b in boards] == EXPECTED
    assert all(isinstance(b, Board) for b in boards)
    for name in EXPECTED:
        assert load_board(name) == load_board(name.upper())


def test_kv260_anchor_figures():
    b = load_board("KV260")
    assert b.part == "xck26-sfvc784-2LV-c"
    assert (b.dsp, b.bram18k, b.uram, b.lut, b.ff) == (1248, 288, 64, 117120, 234240)
    assert b.clock_mhz == 200 and b.clock_period_ns == 5.0
    assert b.interface == "zynq_axis_dma"


@pytest.mark.parametrize("name, figures", [
    ("zcu104", (1728, 624, 96)),
    ("zcu102", (2520, 1824, 0)),
    ("ultra96v2", (360, 432, 0)),
    ("pynq-z2", (220, 280, 0)),
    ("u50", (5952, 2688, 640)),
    ("u55c", (9024, 4032, 960)),
    ("u250", (12288, 5376, 1280)),
    ("u280", (9024, 4032, 960)),
])
def test_dsp_bram_uram(name, figures):
    b = load_board(name)
    assert (b.dsp, b.bram18k, b.uram) == figures


def test_figures_positive_and_consistent():
    for b in all_boards():
        assert b.dsp > 0 and b.bram18k > 0 and b.lut > 0 and b.ff > 0 and b.uram >= 0, b.name
        assert b.bram18k % 2 == 0, b.name
        assert b.ff >= b.lut, b.name  # every family here has 2 FFs per LUT
        assert b.clock_mhz > 0 and b.clock_period_ns == round(1000 / b.clock_mhz, 3)
        assert b.part and b.family and b.source
        if b.interface == "alveo_xrt":
            assert b.family.startswith("Alveo") and b.platform and b.clock_mhz == 300, b.name
        else:
            assert b.interface == "zynq_axis_dma" and b.family.startswith("Zynq"), b.name
    assert load_board("pynq-z2").clock_period_ns == 10.0
    assert load_board("u280").clock_period_ns == 3.333
    assert load_board("pynq-z2").platform is None


def test_names_unique_and_match_file_stems():
    names = [b.name for b in all_boards()]
    assert len(names) == len(set(names))
    stems = sorted(e.name[:-5] for e in resources.files("ming_py.boards").iterdir()
                   if e.name.endswith(".toml") and e.name != PROCESSING_SYSTEMS_FILE)
    assert stems == sorted(names)


def test_unknown_board():
    with pytest.raises(MingError, match=r"unknown board 'nope'; known boards: kv260, pynq-z2, "):
        load_board("nope")


def test_parse_good_file(tmp_path: Path):
    path = tmp_path / "demo.toml"
    path.write_text(GOOD)
    b = parse_board(path.read_text(), path.name)
    assert b.name == "demo" and b.platform is None and b.notes == "" and b.clock_mhz == 200.0


@pytest.mark.parametrize("key, line, message", [
    (None, "junk = 1", r"unknown field\(s\) 'junk'"),
    ("dsp", None, r"missing required field\(s\) 'dsp'"),
    ("part", None, r"missing required field\(s\) 'part'"),
    ("dsp", 'dsp = "360"', r"field 'dsp' must be an integer"),
    ("dsp", "dsp = true", r"field 'dsp' must be an integer"),
    ("lut", "lut = 70560.5", r"field 'lut' must be an integer"),
    ("clock_mhz", 'clock_mhz = "200"', r"field 'clock_mhz' must be a number"),
    ("dsp", "dsp = 0", r"field 'dsp' must be positive"),
    ("bram18k", "bram18k = -2", r"field 'bram18k' must be positive"),
    ("bram18k", "bram18k = 431", r"field 'bram18k' must be even"),
    ("ff", "ff = 0", r"field 'ff' must be positive"),
    ("clock_mhz", "clock_mhz = 0.0", r"field 'clock_mhz' must be positive"),
    ("uram", "uram = -1", r"field 'uram' must be >= 0"),
    ("interface", 'interface = "pcie"', r"field 'interface' must be one of zynq_axis_dma, alveo_xrt"),
    ("part", 'part = ""', r"field 'part' must not be empty"),
    ("part", 'part = "   "', r"field 'part' must not be empty"),
    (None, 'platform = ""', r"field 'platform' must not be empty"),
    ("name", "name = ", r"invalid TOML"),
])
def test_validation_errors(tmp_path: Path, key, line, message):
    text = line + "\n" + GOOD if key is None else _with(key, line)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(MingError, match=message) as info:
        parse_board(path.read_text(), path.name)
    msg = str(info.value)
    assert msg.startswith("board file bad.toml: ") and "\n" not in msg


def test_boards_table():
    lines = boards_table().splitlines()
    header, rule, rows = lines[0], lines[1], lines[2:]
    for col in ("name", "part", "DSP", "BRAM18K", "URAM", "LUT", "FF", "clock MHz", "interface"):
        assert col in header
    assert set(rule) <= {"-", " "}
    assert len(rows) == len(EXPECTED)
    assert [r.split()[0] for r in rows] == EXPECTED
    kv = next(r for r in rows if r.startswith("kv260 "))
    assert kv.split() == ["kv260", "xck26-sfvc784-2LV-c", "1248", "288", "64", "117120", "234240", "200",
                          "zynq_axis_dma"]
    # aligned: the interface column starts at the same offset on every line
    starts = {line.rindex(" ") + 1 for line in [header] + rows}
    assert len(starts) == 1


def test_every_board_has_its_deployment_table():
    for board in all_boards():
        if board.interface == "zynq_axis_dma":
            assert board.zynq is not None and board.alveo is None
            assert board.clock_mhz <= board.zynq.pl_clock_max_mhz
        else:
            assert board.alveo is not None and board.zynq is None and board.platform
    kv260 = load_board("kv260").zynq
    assert kv260.board_part == "xilinx.com:kv260_som:part0:1.4"
    assert kv260.board_connections == "som240_1_connector xilinx.com:kv260_carrier:som240_1_connector:1.3"
    assert kv260.processing_system.clock_property == "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"
    assert load_board("pynq-z2").zynq.processing_system.slave_port == "S_AXI_HP0"
    assert load_board("u250").alveo.memory == "DDR[0]"
    assert sorted(processing_systems()) == ["processing_system7", "zynq_ultra_ps_e"]


@pytest.mark.parametrize("text, message", [
    (GOOD.split("[zynq]")[0], r"interface 'zynq_axis_dma' needs a \[zynq\] table"),
    (GOOD + '\n[alveo]\nmemory = "HBM[0]"\n', r"a \[alveo\] table does not belong to interface 'zynq_axis_dma'"),
    (GOOD.replace('"zynq_ultra_ps_e"', '"zynq_ps"'), r"field 'zynq.processing_system' must be one of zynq_ultra_ps_e, processing_system7, got 'zynq_ps'"),
    (GOOD.replace("pl_clock_max_mhz = 250", "pl_clock_max_mhz = -1"), r"field 'zynq.pl_clock_max_mhz' must be positive"),
    (GOOD.replace('pynq = "PYNQ v3.0"', "pynq = 3"), r"field 'zynq.pynq' must be a string"),
    (GOOD.replace('pynq = "PYNQ v3.0"', ""), r"missing required field\(s\) 'zynq.pynq'"),
    (GOOD.replace('pynq = "PYNQ v3.0"', 'pynq = "3"\nhp = 1'), r"unknown field\(s\) 'zynq.hp'"),
])
def test_deployment_table_errors(text: str, message: str):
    with pytest.raises(MingError, match=r"board file demo.toml: " + message):
        parse_board(text, "demo.toml")


# Each board's memory peak in bytes per second, AXI ports and their bits (the board files' [ddr] sources).
DDR_FIGURES = {
    "kv260": (19.2e9, 4, 128), "pynq-z2": (2.1e9, 4, 64), "u250": (76.8e9, 4, 512), "u280": (460e9, 32, 256),
    "u50": (316e9, 32, 256), "u55c": (460e9, 32, 256), "ultra96v2": (4.264e9, 4, 128),
    "zcu102": (17.064e9, 4, 128), "zcu104": (19.2e9, 4, 128),
}


def test_every_board_has_its_ddr():
    assert board_names() == sorted(DDR_FIGURES)
    for board in all_boards():
        ddr = board.ddr
        assert ddr is not None, board.name
        assert (ddr.peak_bytes_per_s, ddr.ports, ddr.port_bits) == DDR_FIGURES[board.name], board.name
        assert 0 < ddr.sustained_fraction <= 1 and ddr.source.strip(), board.name
        assert 0 < ddr.bytes_per_s(board.clock_mhz) <= ddr.peak_bytes_per_s, board.name


def test_kv260_ddr_bytes_per_s():
    """DDR4 64-bit at 2400 MT/s, 70 % sustained: 13.44 GB/s; at 200 MHz the four 128-bit HP ports carry 64 B a
    cycle, 12.8 GB/s, the lesser; at 300 MHz (19.2 GB/s) the DDR is."""
    ddr = load_board("kv260").ddr
    assert ddr.sustained_fraction == 0.7
    assert ddr.bytes_per_s(200) == 12.8e9
    assert ddr.bytes_per_s(300) == pytest.approx(19.2e9 * 0.7)

DDR = """
[ddr]
peak_bytes_per_s = 19_200_000_000
ports = 4
port_bits = 128
sustained_fraction = 0.7
source = "a data sheet"
"""


@pytest.mark.parametrize("old, new, message", [
    ("ports = 4", "ports = 0", r"field 'ddr.ports' must be positive"),
    ("port_bits = 128", "port_bits = 12", r"field 'ddr.port_bits' must be a whole number of bytes"),
    ("sustained_fraction = 0.7", "sustained_fraction = 1.5", r"field 'ddr.sustained_fraction' must be within"),
    ('source = "a data sheet"', 'source = " "', r"field 'ddr.source' must not be empty"),
    ("ports = 4", 'ports = "4"', r"field 'ddr.ports' must be an integer"),
    ("ports = 4", "", r"missing required field\(s\) 'ddr.ports'"),
])
def test_ddr_table_errors(old: str, new: str, message: str):
    assert parse_board(GOOD + DDR, "demo.toml").ddr.bytes_per_s(200) == 12.8e9
    with pytest.raises(MingError, match=r"board file demo.toml: " + message):
        parse_board(GOOD + DDR.replace(old, new), "demo.toml")
