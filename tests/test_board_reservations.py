"""Platform reservations: a board's `[reserved]` table is parsed and checked, and every budget is taken of what the
board leaves to a design (the device less what its platform keeps)."""

from __future__ import annotations

import pytest

from ming_py.boards import RESERVABLE, Reserved, all_boards, load_board, parse_board, reservations_table
from ming_py.errors import MingError
from ming_py.ilp.budget import Budget

pytestmark = pytest.mark.unit

ALVEO = """\
name = "demo"
part = "xcu280-fsvh2892-2L-e"
family = "Alveo (Virtex UltraScale+)"
dsp = 9024
bram18k = 4032
uram = 960
lut = 1303680
ff = 2607360
clock_mhz = 300
interface = "alveo_xrt"
platform = "xilinx_u280_gen3x16_xdma_1_202211_1"
source = "DS963"

[alveo]
memory = "HBM[0]"
"""
RESERVED = {"dsp": "534", "bram18k": "1058", "uram": "0", "lut": "234680", "source": '"UG1120"'}


def _with_reserved(**changes: str | None) -> str:
    """ALVEO with a [reserved] table: RESERVED's lines, each changed (or dropped when None) by `changes`."""
    fields = {**RESERVED, **changes}
    return ALVEO + "\n[reserved]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items() if v is not None)


def test_a_reserved_table_is_parsed():
    board = parse_board(_with_reserved(), "demo.toml")
    assert board.reserved == Reserved(dsp=534, bram18k=1058, uram=0, lut=234680, source="UG1120")
    assert [board.usable(r) for r in RESERVABLE] == [8490, 2974, 960, 1069000]


def test_a_board_without_the_table_reserves_nothing():
    board = parse_board(ALVEO, "demo.toml")
    assert board.reserved == Reserved() and not board.reserved
    assert [board.usable(r) for r in RESERVABLE] == [9024, 4032, 960, 1303680]


def test_the_whole_device_may_be_reserved():
    assert parse_board(_with_reserved(dsp="9024"), "demo.toml").usable("dsp") == 0


@pytest.mark.parametrize("changes, message", [
    ({"dsp": "-1"}, r"field 'reserved.dsp' must be >= 0, got -1"),
    ({"lut": "1303681"}, r"field 'reserved.lut' \(1303681\) must not exceed the device's 'lut' \(1303680\)"),
    ({"uram": "961"}, r"field 'reserved.uram' \(961\) must not exceed the device's 'uram' \(960\)"),
    ({"bram18k": "1057"}, r"field 'reserved.bram18k' must be even \(2 x BRAM36\), got 1057"),
    ({"source": None}, r"missing required field\(s\) 'reserved.source'"),
    ({"source": '"  "'}, r"field 'reserved.source' must not be empty"),
    ({"dsp": None}, r"missing required field\(s\) 'reserved.dsp'"),
    ({"ff": "1"}, r"unknown field\(s\) 'reserved.ff'; allowed: dsp, bram18k, uram, lut, source"),
    ({"dsp": "534.0"}, r"field 'reserved.dsp' must be an integer"),
    ({"dsp": "true"}, r"field 'reserved.dsp' must be an integer"),
])
def test_a_bad_reserved_table_is_refused(changes, message):
    with pytest.raises(MingError, match=r"^board file bad.toml: " + message) as info:
        parse_board(_with_reserved(**changes), "bad.toml")
    assert "\n" not in str(info.value)


def test_reserved_must_be_a_table():
    with pytest.raises(MingError, match=r"^board file bad.toml: field 'reserved' must be a table"):
        parse_board("reserved = 5\n" + ALVEO, "bad.toml")


@pytest.mark.parametrize("name, reserved", [
    ("u280", (534, 1058, 0, 234680)),
    ("u55c", (534, 1058, 0, 234680)),
    ("u50", (792, 432, 32, 141680)),
    ("u250", (780, 1376, 0, 348000)),
])
def test_the_alveo_shells_keep_the_ug1120_remainder(name, reserved):
    board = load_board(name)
    assert tuple(getattr(board.reserved, r) for r in RESERVABLE) == reserved
    assert "UG1120" in board.reserved.source


def test_every_board_reserves_what_its_platform_takes():
    # the Alveo shells' static regions; on the Zynq boards ming's block design (DMA, SmartConnects, reset)
    for board in all_boards():
        assert board.reserved, board.name


def test_the_u280_default_budget_is_taken_of_what_its_shell_leaves():
    # 90 % of the usable hard blocks, 70 % of the usable LUTs
    assert Budget.of(load_board("u280")) == Budget(dsp=8490 * 90 // 100, bram18k=2974 * 90 // 100,
                                                   uram=960 * 90 // 100, lut=1069000 * 70 // 100)


def test_a_share_is_taken_of_what_the_shell_leaves():
    u280 = load_board("u280")
    assert Budget.of(u280, {"dsp": "50%"}).dsp == 4245
    assert Budget.of(u280, {"dsp": "100%", "bram18k": "10%", "uram": "100%"}) == Budget(dsp=8490, bram18k=297,
                                                                                        uram=960, lut=748300)


def test_a_count_up_to_what_the_shell_leaves_is_taken():
    assert Budget.of(load_board("u280"), {"dsp": "8490"}).dsp == 8490


def test_a_count_over_what_the_shell_leaves_is_refused():
    with pytest.raises(MingError) as info:
        Budget.of(load_board("u280"), {"dsp": "8491"})
    assert str(info.value) == ("--dsp 8491: the u280 leaves 8,490 DSP to a design (9,024 less 534 its platform keeps); "
                               "give at most 100% or 8490")
    with pytest.raises(MingError, match=r"^--lut 1069001: the u280 leaves 1,069,000 LUT to a design \(1,303,680 less "
                                        r"234,680 its platform keeps\); give at most 100% or 1069000$"):
        Budget.of(load_board("u280"), {"lut": "1069001"})


def test_a_resource_the_shell_does_not_touch_keeps_the_plain_message():
    with pytest.raises(MingError, match=r"^--uram 961: the u280 has 960 URAM; give at most 100% or 960$"):
        Budget.of(load_board("u280"), {"uram": "961"})


def test_the_kv260_budget_is_taken_of_what_its_block_design_leaves():
    kv260 = load_board("kv260")
    assert Budget.of(kv260) == Budget(dsp=1248 * 90 // 100, bram18k=284 * 90 // 100, uram=64 * 90 // 100,
                                      lut=110600 * 70 // 100)
    assert Budget.of(kv260, {"dsp": "50%"}).dsp == 624
    with pytest.raises(MingError, match=r"^--dsp 1249: the kv260 has 1248 DSP; give at most 100% or 1248$"):
        Budget.of(kv260, {"dsp": "1249"})


def test_the_reservations_table_lists_every_board():
    lines = reservations_table().splitlines()
    assert lines[0].split() == ["name", "DSP", "BRAM18K", "URAM", "LUT"]
    assert lines[2].split() == ["kv260", "kept", "by", "the", "platform", "0", "4", "0", "6520"]
    assert lines[3].split() == ["left", "to", "a", "design", "1248", "284", "64", "110600"]
    assert lines[4].split() == ["pynq-z2", "kept", "by", "the", "platform", "0", "4", "0", "6520"]
    assert lines[6].split() == ["u250", "kept", "by", "the", "platform", "780", "1376", "0", "348000"]
    assert lines[7].split() == ["left", "to", "a", "design", "11508", "4000", "1280", "1380000"]
    assert [line.split()[0] for line in lines[2::2]] == ["kv260", "pynq-z2", "u250", "u280", "u50", "u55c",
                                                         "ultra96v2", "zcu102", "zcu104"]
