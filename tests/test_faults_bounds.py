"""Bounds on what a model or a settings file can make ming do: sizes are refused in one line before any
stage walks the image, window positions are counted in closed form, YAML aliases are refused.

Every test that would eat the machine on a regression runs in a child process with a wall-clock timeout and
an address-space limit (RLIMIT_AS), so that it fails rather than swaps.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from ming_py import limits
from ming_py.adapters import AXIS_VALUES_PER_WORD, PIPELINE_DEPTH, record_loop, run_lengths, unpack_loop
from ming_py.dataflow import Window
from ming_py.errors import MingError
from ming_py.ilp.pins import MAX_SETTINGS_BYTES, parse_assignments
from ming_py.ir import Graph, Reshape, TensorInfo
from ming_py.process_spec import ProcessSpec, Loop, loop_of
from ming_py.kinds import window as window_kind
from ming_py.kinds.window import position_kinds, window_emits
from ming_py.loops import Access, Position

REPO = Path(__file__).resolve().parent.parent
CHILD_MEMORY = 3 * 2 ** 30  # the child's address space: ming refuses a huge model in a few hundred MB


def _run_bounded(args: list[str], seconds: float, memory: int = CHILD_MEMORY, **kwargs) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    env = dict(os.environ, MING_IMPORT_MEMORY_MB="1536", PYTHONPATH=str(REPO))  # iree-compile below our limit
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=seconds, preexec_fn=limit, env=env,
                              cwd=REPO, **kwargs)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[:4]} did not finish within {seconds} s")


# ---------------------------------------------------------------------------
# Models: one 3x3 conv, QDQ written by hand (fixed scales: no calibration over a huge input)
# ---------------------------------------------------------------------------

def conv_model(path: Path, c: int, h: int, w: int, cout: int = 8) -> Path:
    f32, arr = np.float32, numpy_helper.from_array
    rng = np.random.default_rng(0)
    wq = rng.integers(-4, 5, size=(cout, c, 3, 3)).astype(np.int8)
    bq = rng.integers(-200, 200, size=(cout,)).astype(np.int32)
    sx, sw, sy = f32(2.0 ** -5), f32(2.0 ** -6), f32(2.0 ** -4)
    inits = [arr(wq, "wq"), arr(np.array(sw, f32), "sw"), arr(np.array(0, np.int8), "zw"), arr(bq, "bq"),
             arr(np.array(sx * sw, f32), "sb"), arr(np.array(0, np.int32), "zb"), arr(np.array(sx, f32), "sx"),
             arr(np.array(0, np.int8), "zx"), arr(np.array(sy, f32), "sy"), arr(np.array(0, np.int8), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"]),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, h, w])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def huge_model(tmp_path_factory) -> Path:
    return conv_model(tmp_path_factory.mktemp("bounds") / "huge.onnx", 3, 100_000, 100_000)


# ---------------------------------------------------------------------------
# 1a. Window positions in closed form
# ---------------------------------------------------------------------------

def _enumerated_kinds(w: Window, pointwise: bool) -> tuple[tuple[int, bool, bool], ...]:
    """The former per-position enumeration of `position_kinds`, its runs merged."""
    rows, cols = (w.in_height, w.in_width) if pointwise else (w.padded_height, w.padded_width)
    top_pad, left_pad = (0, 0) if pointwise else (w.pads[0], w.pads[1])
    kinds, emits_before = [], False
    for row in range(rows + 1):
        for col in range(cols if row < rows else 1):
            real = row < rows and 0 <= row - top_pad < w.in_height and 0 <= col - left_pad < w.in_width
            if kinds and kinds[-1][1:] == (real, emits_before):
                kinds[-1] = (kinds[-1][0] + 1, real, emits_before)
            else:
                kinds.append((1, real, emits_before))
            emits_before = row < rows and window_emits(w, pointwise, row, col)
    return tuple(kinds)


@st.composite
def windows(draw):
    kind = draw(st.sampled_from(["conv", "maxpool", "depthwise", "avgpool", "pointwise"]))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if kind == "pointwise":
        kernel, dilation, pads = (1, 1), (1, 1), (0, 0, 0, 0)
    else:
        kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    span = [(h, w)[a] + pads[a] + pads[a + 2] - (kernel[a] - 1) * dilation[a] for a in (0, 1)]
    if min(span) < 1:
        span = [max(s, 1) for s in span]
        pads = (pads[0] + kernel[0] * dilation[0], pads[1] + kernel[1] * dilation[1], pads[2], pads[3])
        span = [(h, w)[a] + pads[a] + pads[a + 2] - (kernel[a] - 1) * dilation[a] for a in (0, 1)]
    outs = [(s - 1) // stride[a] + 1 for a, s in enumerate(span)]
    outs = [draw(st.integers(1, o)) for o in outs]  # a window may also stop early (ceil_mode's opposite)
    return kind, Window(4, h, w, 4, outs[0], outs[1], kernel, stride, dilation, pads)


@settings(max_examples=400, deadline=None)
@given(windows())
def test_position_kinds_closed_form_equals_the_enumeration(case):
    kind, w = case
    kinds = position_kinds(w, kind == "pointwise")
    assert kinds == _enumerated_kinds(w, kind == "pointwise")
    rows, cols = (w.in_height, w.in_width) if kind == "pointwise" else (w.padded_height, w.padded_width)
    assert sum(count for count, _, _ in kinds) == rows * cols + 1
    assert all(a[1:] != b[1:] for a, b in zip(kinds, kinds[1:]))  # runs, never two equal neighbours


@settings(max_examples=60, deadline=None)
@given(windows(), st.integers(1, 3), st.integers(1, 3))
def test_window_loops_are_unchanged(monkeypatch_free_case, channels_in, channels_out):
    """The whole loop (what fifo.py and the simulator walk) from the closed form equals the one from the
    enumeration."""
    kind, w = monkeypatch_free_case
    c_out = channels_in if kind in ("maxpool", "depthwise", "avgpool") else channels_out
    w = Window(channels_in, w.in_height, w.in_width, c_out, w.out_height, w.out_width, w.kernel, w.stride,
               w.dilation, w.pads)
    spec = ProcessSpec(kind, ((channels_in, w.in_height, w.in_width),), ((c_out, w.out_height, w.out_width),),
                      (), (1,), (1,), w)
    loop = loop_of(spec)
    saved = window_kind.position_kinds
    try:
        window_kind.position_kinds = _enumerated_kinds
        reference = loop_of(spec)
    finally:
        window_kind.position_kinds = saved
    assert loop == reference


def test_position_kinds_of_a_huge_map_take_rows_not_pixels():
    """100000 x 100000: O(rows) runs in well under a second (was 8 GB before a word)."""
    code = textwrap.dedent("""
        import time
        from ming_py.dataflow import Window
        from ming_py.kinds.window import position_kinds
        w = Window(3, 100000, 100000, 8, 100000, 100000, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
        start = time.perf_counter()
        kinds = position_kinds(w, False)
        print(len(kinds), sum(k[0] for k in kinds), time.perf_counter() - start)
    """)
    result = _run_bounded([sys.executable, "-c", code], seconds=60, memory=2 * 2 ** 30)
    assert result.returncode == 0, result.stderr[-500:]
    runs, positions, seconds = result.stdout.split()
    assert int(positions) == 100_002 ** 2 + 1
    assert int(runs) <= 5 * 100_002
    assert float(seconds) < 10


# ---------------------------------------------------------------------------
# 1b. Limits checked on the graph, one line naming the limit and the figure
# ---------------------------------------------------------------------------

def _graph(maps: dict[str, tuple[int, ...]], constants: dict[str, np.ndarray] | None = None, nodes=()) -> Graph:
    return Graph("g", tensors={name: TensorInfo(name, shape, "i8") for name, shape in maps.items()},
                 constants=constants or {}, nodes=list(nodes))


def test_a_huge_input_is_refused_naming_the_input_and_the_limit(huge_model):
    from ming_py.pipeline import lift

    with pytest.raises(MingError) as error:
        lift(huge_model)  # the frontend's graph holds only shapes; `lift` checks it before any stage runs
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("input 'x' is 3x100000x100000 (3.0e+10 values per image); ming handles maps up to "
                              f"{limits.MAX_MAP_VALUES} values (the simulator and FIFO sizing walk every token)")


def test_a_model_within_the_limits_passes(tmp_path):
    from ming_py.pipeline import lift

    graph = lift(conv_model(tmp_path / "small.onnx", 3, 64, 64))
    limits.check_limits(graph)
    figures = limits.figures(graph)
    assert figures["largest_map"][1] == 8 * 64 * 64
    assert figures["streamed_values"] == (3 + 8) * 64 * 64
    assert figures["weight_bytes"] >= 8 * 3 * 3 * 3
    assert figures["nodes"] == len(graph.nodes)


def test_the_values_streamed_are_limited_when_every_map_is_within_its_limit():
    side = 1024
    maps = {f"t{i}": (8, side, side) for i in range(limits.MAX_STREAMED_VALUES // (8 * side * side) + 1)}
    assert all(8 * side * side <= limits.MAX_MAP_VALUES for _ in maps)
    with pytest.raises(MingError, match=r"^the model streams 2\.\de\+07 values per image over its \d+ maps; ming "
                                        r"handles up to 2\.4e\+07 \(the simulator and FIFO sizing walk every token\)"):
        limits.check_limits(_graph(maps))


def test_a_map_read_twice_streams_twice():
    maps = {"a": (4, 8, 8), "b": (4, 8, 8), "c": (4, 8, 8)}
    nodes = [Reshape("r1", "r1", "a", "b"), Reshape("r2", "r2", "a", "c")]
    graph = _graph(maps, nodes=nodes)
    assert limits.map_figures(graph) == {"a": 256}  # Reshapes alias their input; no other consumer


def test_the_weights_are_limited():
    big = np.broadcast_to(np.int8(0), (limits.MAX_WEIGHT_BYTES + 1,))
    with pytest.raises(MingError, match=r"^the model's weights take 64\.0 MiB; ming handles up to 64 MiB"):
        limits.check_limits(_graph({"x": (1, 4, 4)}, {"w": big}))


def test_the_nodes_are_limited():
    nodes = [Reshape(f"r{i}", f"r{i}", "x", f"y{i}") for i in range(limits.MAX_NODES + 1)]
    with pytest.raises(MingError, match=rf"^the model has {limits.MAX_NODES + 1} nodes; ming handles up to "
                                        rf"{limits.MAX_NODES}"):
        limits.check_limits(_graph({"x": (1, 4, 4)}, nodes=nodes))


def test_the_fifo_bits_are_limited():
    limits.check_fifo_bits({"a": 1024, "b": 2048})
    with pytest.raises(MingError, match=r"^the FIFOs need 1\.1e\+09 bits \(the largest, b, 1\.1e\+09\); ming handles "
                                        r"up to 1\.1e\+09 bits"):
        limits.check_fifo_bits({"a": 8, "b": limits.MAX_FIFO_BITS})


def test_ming_build_refuses_a_huge_input_in_one_line(huge_model, tmp_path):
    """Needs `check_limits` called from `pipeline.lift`: within seconds and a bounded address space."""
    start = time.monotonic()
    result = _run_bounded([sys.executable, "-m", "ming_py.cli", "build", str(huge_model), "-o",
                           str(tmp_path / "out"), "-q"], seconds=120)
    elapsed = time.monotonic() - start
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-800:]
    assert len(lines) == 1 and lines[0].startswith("ming: error: input 'x' is 3x100000x100000"), lines
    assert "ming handles maps up to" in lines[0]
    assert elapsed < 60
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# 2. Settings files: no YAML aliases, bounded size
# ---------------------------------------------------------------------------

def _laughs(levels: int = 9) -> str:
    names = "abcdefghijklmnop"
    lines = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for i in range(1, levels):
        lines.append(f"{names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_is_refused(tmp_path):
    path = tmp_path / "pins.yaml"
    path.write_text("conv2: &pins {unroll: {oc: 8}}\nconv3: *pins\n")
    with pytest.raises(MingError, match=r"pins\.yaml: YAML anchor &pins \(line 1\) is not allowed in a settings file"):
        parse_assignments([], [path])
    path.write_text("conv2: {unroll: {oc: 8}}\nconv3: *pins\n")
    with pytest.raises(MingError, match=r"pins\.yaml: YAML alias \*pins \(line 2\) is not allowed in a settings file"):
        parse_assignments([], [path])


def test_a_billion_laughs_settings_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(_laughs())
    assert path.stat().st_size < 1000
    code = ("import sys\nfrom ming_py.ilp.pins import parse_assignments\nfrom ming_py.errors import MingError\n"
            f"try:\n    parse_assignments([], [{str(path)!r}])\nexcept MingError as e:\n    print(e)\n")
    result = _run_bounded([sys.executable, "-c", code], seconds=30, memory=1 * 2 ** 30)
    assert result.returncode == 0, result.stderr[-500:]
    assert result.stdout.strip() == f"{path}: YAML anchor &a (line 1) is not allowed in a settings file; write every " \
                                    "setting out"


def test_a_settings_file_past_its_size_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "pins.json"
    path.write_text('{"c.depth": 4' + " " * MAX_SETTINGS_BYTES + "}")
    with pytest.raises(MingError, match=rf"^{re.escape(str(path))}: settings file is 1,048,590 bytes; ming reads settings files up "
                                        r"to 1,048,576 bytes"):
        parse_assignments([], [path])


def test_yaml_settings_still_parse(tmp_path):
    path = tmp_path / "pins.yml"
    path.write_text("conv2:\n  unroll:\n    oc: 8\nconv1_to_pool1.depth: 32\n")
    assert parse_assignments([], [path]) == {"conv2.unroll.oc": 8, "conv1_to_pool1.depth": 32}


# ---------------------------------------------------------------------------
# 3. The ports' loops are built without a list of every iteration
# ---------------------------------------------------------------------------

def _unpack_listed(values: int, lanes: int) -> Loop:
    idle, writes = Position(1, (), (Access(),)), Position(1, (), (Access(0, 1, 1),))
    words = -(-values // AXIS_VALUES_PER_WORD)
    held = read = 0
    iterations = []
    for _ in range(max(words, values // lanes)):
        if held < lanes and read < words:
            held += min(AXIS_VALUES_PER_WORD, values - AXIS_VALUES_PER_WORD * read)
            read += 1
        if held >= lanes:
            held -= lanes
            iterations.append(writes)
        else:
            iterations.append(idle)
    return Loop(PIPELINE_DEPTH, run_lengths(iterations))


def _record_listed(parts) -> Loop:
    idle = Position(1, (Access(),) * len(parts), ())
    iterations = []
    for index, (values, lanes) in enumerate(parts):
        if index:
            iterations += [idle] * PIPELINE_DEPTH
        reads = Position(1, tuple(Access(0, 1, int(i == index)) for i in range(len(parts))), ())
        tokens, held, read = values // lanes, 0, 0
        while read < tokens or held:
            if held < AXIS_VALUES_PER_WORD and read < tokens:
                held, read = held + lanes, read + 1
                iterations.append(reads)
            else:
                iterations.append(idle)
            if held >= AXIS_VALUES_PER_WORD or read == tokens:
                held -= min(held, AXIS_VALUES_PER_WORD)
    return Loop(PIPELINE_DEPTH, run_lengths(iterations))


@pytest.mark.parametrize("lanes", [1, 2, 3, 4, 5, 8, 16, 24])
def test_port_loops_are_unchanged(lanes):
    for values in (lanes, 7 * lanes, 8 * lanes, 40 * lanes + lanes):
        assert unpack_loop(values, lanes) == _unpack_listed(values, lanes)
        assert record_loop([(values, lanes)]) == _record_listed([(values, lanes)])
        assert record_loop([(values, lanes), (16, 1), (3 * lanes, lanes)]) == \
            _record_listed([(values, lanes), (16, 1), (3 * lanes, lanes)])


def test_port_loops_keep_no_list_of_iterations():
    values = 3 * 2 ** 18  # 786432 values: a list of every iteration would take 6 MB
    tracemalloc.start()
    try:
        unpack, record = unpack_loop(values, 3), record_loop([(values, 1)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert unpack.iterations == values // 3 and record.iterations >= values
    assert peak < 2 ** 20, peak


# ---------------------------------------------------------------------------
# 3. Branches of residual chains are found per channel, not per path
# ---------------------------------------------------------------------------

def residual_chain(path: Path, blocks: int, c: int = 4, h: int = 4) -> Path:
    """x -> (1x1 conv + identity skip -> Add) x blocks, QDQ by hand with one fixed scale."""
    f32, arr = np.float32, numpy_helper.from_array
    rng = np.random.default_rng(0)
    inits = [arr(np.array(2.0 ** -5, f32), "sx"), arr(np.array(0, np.int8), "zx"), arr(np.array(2.0 ** -6, f32), "sw"),
             arr(np.array(0, np.int8), "zw"), arr(np.array(2.0 ** -11, f32), "sb"), arr(np.array(0, np.int32), "zb")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "sx", "zx"], ["d0"])]
    for i in range(blocks):
        inits += [arr(rng.integers(-4, 5, size=(c, c, 1, 1)).astype(np.int8), f"w{i}"),
                  arr(rng.integers(-50, 50, size=(c,)).astype(np.int32), f"b{i}")]
        nodes += [helper.make_node("DequantizeLinear", [f"w{i}", "sw", "zw"], [f"wd{i}"]),
                  helper.make_node("DequantizeLinear", [f"b{i}", "sb", "zb"], [f"bd{i}"]),
                  helper.make_node("Conv", [f"d{i}", f"wd{i}", f"bd{i}"], [f"c{i}"], name=f"conv{i}"),
                  helper.make_node("QuantizeLinear", [f"c{i}", "sx", "zx"], [f"cq{i}"]),
                  helper.make_node("DequantizeLinear", [f"cq{i}", "sx", "zx"], [f"cd{i}"]),
                  helper.make_node("Add", [f"cd{i}", f"d{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("QuantizeLinear", [f"a{i}", "sx", "zx"], [f"q{i + 1}"]),
                  helper.make_node("DequantizeLinear", [f"q{i + 1}", "sx", "zx"], [f"d{i + 1}" if i < blocks - 1 else "y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, h, h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _paths_split_latency(graph, channel, split, latency):
    """The former `split_latency`: every path followed."""
    if channel.producer == split:
        return 0
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:
        return None
    upstream = [_paths_split_latency(graph, graph.channels[c], split, latency) for c in producer.inputs]
    upstream = [n for n in upstream if n is not None]
    return latency[producer.name] + max(upstream) if upstream else None


def _paths_branch_heads(graph, split, channel_name):
    channel = graph.channels[channel_name]
    if channel.producer == split:
        return frozenset({channel.name})
    producer = next((p for p in graph.processes if p.name == channel.producer), None)
    if producer is None:
        return frozenset()
    return frozenset().union(*(_paths_branch_heads(graph, split, c) for c in producer.inputs))


def _paths_diverging(graph):
    for split in (p for p in graph.processes if p.kind == "split"):
        for join in (p for p in graph.processes if len(p.inputs) > 1):
            heads = {slot: _paths_branch_heads(graph, split.name, c) for slot, c in enumerate(join.inputs)}
            heads = {slot: h for slot, h in heads.items() if h}
            sets = list(heads.values())
            if len(heads) < 2 or any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
                continue
            yield split, join, {slot: sorted(h) for slot, h in heads.items()}


@pytest.mark.parametrize("model", ["residual_chain", "two_residual_stages", "concat_branches", "add_conv_branches"])
def test_branches_and_latencies_are_unchanged(model, quantized, tmp_path):
    from ming_py.process_spec import depth_bound
    from ming_py.line_buffers import fifo
    from ming_py.line_buffers.streaming import build_stream_graph
    from ming_py.pipeline import lift

    path = residual_chain(tmp_path / "chain.onnx", 6) if model == "residual_chain" else quantized(model)
    graph = build_stream_graph(lift(path))
    assert [(s.name, j.name, h) for s, j, h in fifo._diverging(graph)] == \
        [(s.name, j.name, h) for s, j, h in _paths_diverging(graph)]
    latency = {p.name: depth_bound(p.kind) for p in graph.processes}
    for split in graph.processes:
        for channel in graph.channels.values():
            assert fifo.split_latency(graph, channel, split.name, latency) == \
                _paths_split_latency(graph, channel, split.name, latency)


def test_fifo_sizing_of_a_deep_residual_chain_takes_milliseconds(tmp_path):
    """24 residual blocks: 2**24 paths from the last Add back to the first split (was minutes, 1.8 s at 16)."""
    path = residual_chain(tmp_path / "chain24.onnx", 24)
    code = textwrap.dedent(f"""
        import time
        from ming_py.line_buffers import fifo
        from ming_py.line_buffers.streaming import build_stream_graph
        from ming_py.pipeline import lift
        graph = build_stream_graph(lift({str(path)!r}))
        start = time.perf_counter()
        plan = fifo.reservation_plan(graph)
        order = fifo.record_order(graph)
        print(len(list(fifo._diverging(graph))), time.perf_counter() - start)
    """)
    result = _run_bounded([sys.executable, "-c", code], seconds=60, memory=2 * 2 ** 30)
    assert result.returncode == 0, result.stderr[-500:]
    joins, seconds = result.stdout.split()
    assert int(joins) == 24
    assert float(seconds) < 5
