"""Headroom and platform reservations: the default budget is a share of what a board leaves to a design (DSP,
BRAM18K and URAM 90 %, LUT 70 %), what the platform keeps (`[reserved]`: ming's block design on a Zynq board, the
shell on an Alveo card) is subtracted first, `--bram 100%` lifts the share but never the reservation, and a
budget no design fits names the limit that bounded it."""

from __future__ import annotations

import pytest

from ming_py.boards import RESERVABLE, all_boards, load_board
from ming_py.errors import MingError
from ming_py.ilp.budget import DEFAULT_SHARES, Budget, limits, what_bounds, with_weight_port
from ming_py.ilp.candidates import weight_port_reservation
from ming_py.ilp.pins import Pins
from ming_py.ilp.solve import NoDesignFits, solve
from ming_py.line_buffers import build_stream_graph

ZYNQ = ("kv260", "pynq-z2", "ultra96v2", "zcu102", "zcu104")


def _default(board, resource: str) -> int:
    return (getattr(board, resource) - getattr(board.reserved, resource)) * DEFAULT_SHARES[resource] // 100


@pytest.mark.unit
def test_the_default_shares_leave_headroom_on_every_resource():
    assert DEFAULT_SHARES == {"dsp": 90, "bram18k": 90, "uram": 90, "lut": 70}


@pytest.mark.unit
@pytest.mark.parametrize("board", all_boards(), ids=lambda b: b.name)
def test_the_default_budget_is_the_share_of_the_board_file_less_its_reservation(board):
    assert Budget.of(board) == Budget(**{r: _default(board, r) for r in RESERVABLE})


@pytest.mark.unit
def test_the_kv260_default_budget_in_figures():
    # 288 BRAM18K less the 4 of the DMA's FIFOs, 90 % of the 284 left; 117,120 LUT less 6,520, 70 % of 110,600
    assert Budget.of(load_board("kv260")) == Budget(dsp=1123, bram18k=255, uram=57, lut=77420)


@pytest.mark.unit
@pytest.mark.parametrize("name", ZYNQ)
def test_every_zynq_board_reserves_the_block_design_and_the_weight_port(name):
    board = load_board(name)
    assert (board.reserved.dsp, board.reserved.bram18k, board.reserved.uram) == (0, 4, 0)
    assert board.reserved.lut == 2000 + 1000 + 3500 + 20  # axi_dma, control_smc, memory_smc, reset
    assert (board.weight_port.bram18k, board.weight_port.lut) == (2, 1500)
    for table in (board.reserved, board.weight_port):
        assert "PG022" in table.source and "PG247" in table.source


@pytest.mark.unit
@pytest.mark.parametrize("board", all_boards(), ids=lambda b: b.name)
def test_a_design_takes_at_most_90_percent_of_the_bram_left_to_it_by_default(board):
    assert Budget.of(board).bram18k <= board.usable("bram18k") * 0.9


@pytest.mark.unit
def test_the_kv260_design_and_its_platform_stay_within_90_percent_of_the_device_bram():
    kv260 = load_board("kv260")
    assert Budget.of(kv260).bram18k + kv260.reserved.bram18k == 259 <= 288 * 0.9


@pytest.mark.unit
def test_a_reservation_is_subtracted_before_any_share():
    kv260 = load_board("kv260")
    assert kv260.usable("bram18k") == 284
    assert Budget.of(kv260, {"bram18k": "50%"}).bram18k == 142
    assert Budget.of(kv260, {"lut": "100%"}).lut == 110600


@pytest.mark.unit
@pytest.mark.parametrize("resource, option", [("bram18k", "100%"), ("dsp", "100%"), ("uram", "100%")])
def test_100_percent_lifts_the_share_but_not_the_reservation(resource, option):
    kv260 = load_board("kv260")
    lifted = getattr(Budget.of(kv260, {resource: option}), resource)
    assert lifted == kv260.usable(resource) > getattr(Budget.of(kv260), resource)
    assert lifted == getattr(kv260, resource) - getattr(kv260.reserved, resource)


@pytest.mark.unit
def test_a_count_past_what_the_platform_leaves_is_refused():
    with pytest.raises(MingError, match=r"^--bram 285: the kv260 leaves 284 BRAM18K to a design \(288 less 4 its "
                                        r"platform keeps\); give at most 100% or 284$"):
        Budget.of(load_board("kv260"), {"bram18k": "285"})


@pytest.mark.unit
def test_the_limits_say_what_set_each_budget():
    kv260 = load_board("kv260")
    table = limits(kv260, Budget.of(kv260, {"dsp": "100%", "uram": "10"}))
    assert table["bram18k"] == {"device": 288, "platform": 4, "usable": 284, "budget": 255, "set_by": "default",
                                "share_percent": 89.8, "default_share_percent": 90}
    assert table["dsp"] == {"device": 1248, "platform": 0, "usable": 1248, "budget": 1248, "set_by": "all",
                            "share_percent": 100.0}
    assert table["uram"]["set_by"] == "option" and table["uram"]["share_percent"] == 15.6
    assert table["lut"]["platform"] == 6520 and table["lut"]["budget"] == 77420


@pytest.mark.unit
def test_the_weight_port_is_taken_from_what_the_board_leaves_as_the_platform_is():
    kv260, port = load_board("kv260"), {"bram18k": 2, "lut": 1500}
    budget = with_weight_port(kv260, Budget.of(kv260), port)
    assert (budget.bram18k, budget.lut) == (282 * 90 // 100, 109100 * 70 // 100)  # the default share of the rest
    assert (budget.dsp, budget.uram) == (1123, 57)  # the DMA takes neither
    assert with_weight_port(kv260, Budget.of(kv260, {"bram18k": "100%"}), port).bram18k == 282
    assert with_weight_port(kv260, Budget.of(kv260, {"bram18k": "4"}), port).bram18k == 4  # the user's count stays
    assert with_weight_port(kv260, Budget.of(kv260, {"bram18k": "283"}), port).bram18k == 282
    assert with_weight_port(kv260, Budget.of(kv260), {}) == Budget.of(kv260)
    table = limits(kv260, budget, port)["bram18k"]
    assert table == {"device": 288, "platform": 4, "weight_port": 2, "usable": 282, "budget": 253,
                     "set_by": "default", "share_percent": 89.7, "default_share_percent": 90}


@pytest.mark.unit
def test_what_bounds_names_the_default_share_and_how_to_lift_it():
    kv260 = load_board("kv260")
    assert what_bounds(kv260, "bram18k", 255) == (
        "BRAM18K 255 is the default 90 % of the 284 the kv260 leaves to a design (288 less 4 its platform keeps), "
        "headroom for place and route: --bram 100% lifts it to 284")
    assert what_bounds(kv260, "bram18k", 284) == ("BRAM18K 284 is all the kv260 leaves to a design (288 less 4 its "
                                                  "platform keeps)")
    assert what_bounds(kv260, "dsp", 100) == "DSP 100 is what --dsp allows: raise it (at most 100% or 1,248)"
    assert what_bounds(kv260, "bram18k", 253, weight_port=2) == (
        "BRAM18K 253 is the default 90 % of the 282 the kv260 leaves to a design (288 less 4 its platform keeps "
        "and 2 the weight port's DMA), headroom for place and route: --bram 100% lifts it to 282")
    assert what_bounds(load_board("u280"), "uram", 864) == (
        "URAM 864 is the default 90 % of the 960 the u280 leaves to a design, headroom for place and route: "
        "--uram 100% lifts it to 960")


def test_the_weight_port_is_set_aside_only_where_uram_weights_may_be_chosen(lifted):
    graph = build_stream_graph(lifted("tiny_cnn"))
    kv260 = load_board("kv260")
    assert weight_port_reservation(graph, kv260, Budget.of(kv260), None) == {}
    # a BRAM budget the ROM weights do not fit offers URAM weights, and the weight port's DMA with them
    assert weight_port_reservation(graph, kv260, Budget.of(kv260, {"bram18k": "0"}), None) == {"bram18k": 2,
                                                                                              "lut": 1500}
    # no URAM to load into: nothing to set aside
    assert weight_port_reservation(graph, kv260, Budget.of(kv260, {"bram18k": "0", "uram": "0"}), None) == {}
    # weights pinned to URAM have the port whatever the budget
    pins = Pins(weights={graph.processes[0].name: "uram"})
    assert weight_port_reservation(graph, kv260, Budget.of(kv260), None, pins) == {"bram18k": 2, "lut": 1500}
    # the Alveo cards' weight mover is a kernel of its own, not a [weight_port] of the board file
    u280 = load_board("u280")
    assert weight_port_reservation(graph, u280, Budget.of(u280, {"bram18k": "0"}), None) == {}


def test_no_design_fits_names_the_default_share_that_bounded_it(lifted):
    graph = build_stream_graph(lifted("tiny_cnn"))
    kv260 = load_board("kv260")
    with pytest.raises(NoDesignFits) as info:
        solve(graph, kv260, Budget.of(kv260, {"lut": "100"}))
    message = str(info.value)
    assert "no design fits the budget (" in message
    assert "LUT 100 is what --lut allows: raise it (at most 100% or 110,600)" in message
    assert "BRAM18K" not in message.split("every design needs at least")[1].split(";", 1)[1]  # BRAM is not short


@pytest.mark.unit
def test_a_dense_layer_whose_rom_weights_would_fill_the_bram_stays_within_90_percent():
    """A dense layer whose ROM weights (1,024 x 536 int8) need 276 BRAM18K at the least: with all 288 BRAM18K of the
    KV260 and nothing reserved, the ILP keeps them as ROMs at 269 BRAM18K, 93 % of the device and 95 % with the
    DMA's 4; within the default 255 it moves them to URAM and the design with the platform's blocks stays within
    90 % of the device."""
    import hand_graphs

    graph = hand_graphs.map_graph("dense", (1024, 1, 1), (536, 1, 1))
    hand_graphs.conv(graph, "fc", "x", "y", 536)
    stream_graph = build_stream_graph(graph)
    kv260 = load_board("kv260")
    everything = solve(stream_graph, kv260, Budget(dsp=1248, bram18k=288, uram=64, lut=117120 * 70 // 100), "frugal")
    assert everything.totals["bram18k"] + kv260.reserved.bram18k > 288 * 0.9
    default = solve(stream_graph, kv260, Budget.of(kv260), "frugal")
    assert default.totals["bram18k"] <= 253  # the default share of what the DMA and the weight port's DMA leave
    assert default.totals["bram18k"] + kv260.reserved.bram18k + kv260.weight_port.bram18k <= 288 * 0.9
    assert default.totals["solver"]["weight_port_reserved"] == {"bram18k": 2, "lut": 1500}
    assert default.totals["uram"] <= 57


@pytest.mark.slow
def test_the_coral_mobilenet_fits_the_kv260_default_budget_with_urams_and_is_verified(tmp_path):
    """Coral's MobileNetV1 0.25 at 128 (615,704 int8 weights after the uint8 split) outgrows the KV260's BRAM with
    ROM weights; within the default budget it takes URAM weights, the weight port's DMA is set aside, and the
    design with the platform's blocks stays within 90 % of the device's BRAM18K. The build verifies its C++."""
    import json
    from pathlib import Path

    from ming_py.build import build
    from ming_py.options import BuildOptions

    coral = Path(__file__).parent / "data" / "published" / "mobilenet_v1_0.25_128_quant.tflite"
    design = build(coral, tmp_path / "out", BuildOptions(board="kv260"))
    report = json.loads(design.files["report.json"])
    assert report["verification"]["verified"] and report["verification"]["equal"]
    totals, limits_ = report["totals"], report["totals"]["solver"]["limits"]
    assert "weights_load" in totals and limits_["bram18k"]["weight_port"] == 2
    assert totals["bram18k"] <= limits_["bram18k"]["budget"] == 253
    assert totals["bram18k"] + 4 + 2 <= 288 * 0.9
    assert totals["uram"] <= 57


@pytest.mark.unit
@pytest.mark.parametrize("line, message", [
    ("bram18k = 3", r"field 'weight_port.bram18k' must be even \(2 x BRAM36\), got 3"),
    ("bram18k = 300", r"field 'weight_port.bram18k' \(300\) must not exceed the device's 'bram18k' \(288\)"),
    ('source = " "', r"field 'weight_port.source' must not be empty; name the document the figures come from"),
])
def test_a_bad_weight_port_table_is_refused_naming_its_field(line, message):
    from importlib import resources

    from ming_py.boards import parse_board

    text = resources.files("ming_py.boards").joinpath("kv260.toml").read_text(encoding="utf-8")
    key = line.split(" = ")[0]
    start = text.index("[weight_port]")
    field = text.index(f"\n{key} = ", start) + 1
    edited = text[:field] + line + text[text.index("\n", field):]
    with pytest.raises(MingError, match=rf"^board file kv260.toml: {message}$"):
        parse_board(edited, "kv260.toml")
