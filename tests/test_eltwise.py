"""Element-wise Mul, Add and Sub of two feature maps, with a per-channel vector or a scalar broadcast over a
map, and squeeze-and-excitation.

* The rules: `numerics.mul_requant` (integers) equals the float32 model of onnxruntime's QLinearMul kernel and
  onnxruntime itself on every int8 pair; `numerics.add_requant` equals the float32 model of QLinearAdd
  (fused Add) and of the float `DQ -> Add/Sub -> Q` (Sub, unfused Add) and onnxruntime itself on every pair;
  `ming::mul_requant`, `ming::add_requant` and `ming::add_float_requant` (C++) equal them on every pair.
* Small networks quantized with quantize_static: `ming reference` == onnxruntime (`==`), the C-simulation ==
  `ming reference` (ports checked), the concurrent C-simulation with the built FIFO depths runs them without
  a deadlock; a squeeze-and-excitation's map FIFO holds the whole image, and with half of it the design
  deadlocks.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import zoo
from emit_helpers import csim, stream_graph_of
from ming_py import numerics as nx
from ming_py import reference
from ming_py.boards import load_board
from ming_py.build import BuildOptions
from ming_py.ilp.explore import explore
from ming_py.line_buffers import build_stream_graph
from ming_py.csim import CsimDeadlock
from ming_py.dataflow import Schedule
from ming_py.emit.reports import report
from ming_py.errors import MingError
from ming_py.line_buffers.fifo import depths_in_pixels, fifo_bits
from ming_py.parity import onnxruntime_outputs
from ming_py.pipeline import lift
from ming_py.simulate import simulate
from ming_py.ort_session import onnxruntime_session

logging.getLogger().setLevel(logging.ERROR)

TEMPLATES = Path(__file__).resolve().parents[1] / "emit" / "templates"
F32 = np.float32
PAIRS_A = np.repeat(np.arange(-128, 128), 256)  # every (a, b) int8 pair
PAIRS_B = np.tile(np.arange(-128, 128), 256)
SEEDS = (0, 1, 2)


# ---- the rule ------------------------------------------------------------------------------------------

def scale_sets(seed: int, count: int):
    """(sa, za, sb, zb, sy, zy): random scales and zero points, some output scales a power of two times
    sa * sb (exact float32 ties), a few at the ends of the multiplier's range."""
    rng = np.random.default_rng(seed)
    sets = []
    for i in range(count):
        sa, sb = F32(rng.uniform(0.002, 0.2)), F32(rng.uniform(0.002, 0.2))
        ratio = 2.0 ** int(rng.integers(-3, 12)) if i % 4 == 0 else float(np.exp(rng.uniform(-1, 8)))
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        sets.append((sa, za, sb, zb, F32(sa * sb * ratio), zy))
    sets.append((F32(1.0), 0, F32(1.0), -128, F32(2.0 ** 14), 127))  # R = 2^-14 ... and its ends:
    sets.append((F32(0.5), 127, F32(0.25), 0, F32(2.0 ** -17), -128))  # R = 2^14
    sets.append((F32(2.0 ** -12), -3, F32(2.0 ** -12), 5, F32(1.0), 1))  # R = 2^-24
    return sets


@pytest.mark.parametrize("domain_offset", [nx.ORT_X86_DOMAIN_OFFSET, 0], ids=["uint8_domain", "int8_domain"])
def test_integer_mul_rule_equals_the_float32_kernel_on_every_pair(domain_offset):
    checked = 0
    for sa, za, sb, zb, sy, zy in scale_sets(1, 60):
        want = nx.ort_qlinear_mul_reference(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, domain_offset)
        got = nx.mul_requant(PAIRS_A, za, PAIRS_B, zb, nx.mul_multiplier(sa, sb, sy), zy,
                             domain_offset=domain_offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))
        checked += got.size
    assert checked == 63 * 65536


@pytest.mark.unit
def test_the_zero_point_is_added_in_float_before_rounding():
    """Power-of-two scales give exact .5 products: rounding after adding the zero point (ORT) and before it
    differ there, so the rule is not `requantize`'s (zero point after rounding)."""
    sa, za, sb, zb, sy, zy = F32(0.5), 0, F32(1.0), 0, F32(1.0), 1
    got = nx.mul_requant(PAIRS_A, za, PAIRS_B, zb, nx.mul_multiplier(sa, sb, sy), zy)
    after = nx.requantize((PAIRS_A - za) * (PAIRS_B - zb), nx.mul_multiplier(sa, sb, sy), zy)
    assert np.count_nonzero(got != after) > 1000


def mul_model(sa, za, sb, zb, sy, zy, b_shape, op="Mul") -> onnx.ModelProto:
    """QDQ: a, b -> QuantizeLinear -> DequantizeLinear -> op -> QuantizeLinear -> DequantizeLinear (onnxruntime
    fuses the op into QLinearMul only when its QuantizeLinear is not the graph's output); `a` is
    (1, 256, 256, 1), `b` of `b_shape` (the same, or a per-channel vector (1, 256, 1, 1))."""
    inits = []

    def quantization(name, scale, zero_point):
        if not any(i.name == f"{name}_scale" for i in inits):
            inits.append(numpy_helper.from_array(np.array(scale, F32), f"{name}_scale"))
            inits.append(numpy_helper.from_array(np.array(zero_point, np.int8), f"{name}_zero_point"))
        return [f"{name}_scale", f"{name}_zero_point"]

    nodes = [helper.make_node("QuantizeLinear", ["a"] + quantization("a", sa, za), ["a_q"]),
             helper.make_node("DequantizeLinear", ["a_q"] + quantization("a", sa, za), ["a_f"]),
             helper.make_node("QuantizeLinear", ["b"] + quantization("b", sb, zb), ["b_q"]),
             helper.make_node("DequantizeLinear", ["b_q"] + quantization("b", sb, zb), ["b_f"]),
             helper.make_node(op, ["a_f", "b_f"], ["y_f"]),
             helper.make_node("QuantizeLinear", ["y_f"] + quantization("y", sy, zy), ["y_q"]),
             helper.make_node("DequantizeLinear", ["y_q"] + quantization("y", sy, zy), ["y"])]
    graph = helper.make_graph(nodes, "pairs", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 256, 256, 1]),
                                               helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256, 256, 1])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_pairs(model: onnx.ModelProto, a: np.ndarray, b: np.ndarray, sy, zy, config: dict) -> np.ndarray:
    """The int8 outputs (requantized from the dequantized ones, exactly) and the op types ORT ran."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    session = onnxruntime_session(model.SerializeToString(), options)
    y = session.run(None, {"a": a, "b": b})[0].reshape(-1)
    q = nx.ort_quantize_linear(y, sy, zy).astype(np.int64)
    assert np.array_equal(nx.ort_dequantize_linear(q, sy, zy), y)
    return q


@pytest.mark.unit
@pytest.mark.parametrize("broadcast", [False, True], ids=["maps", "vector"])
@pytest.mark.parametrize("config,offset", [({}, nx.ORT_X86_DOMAIN_OFFSET), ({"session.qdqisint8allowed": "1"}, 0)],
                         ids=["default_session", "int8_session"])
def test_mul_rule_equals_onnxruntime_on_every_pair(broadcast, config, offset):
    """Every int8 pair through onnxruntime's QLinearMul: the map holds a, the other operand b (per pixel,
    or one value per channel broadcast over the channel's 256 pixels)."""
    a_values, b_values = (PAIRS_B, PAIRS_A) if broadcast else (PAIRS_A, PAIRS_B)  # channel-major either way
    b_input = np.arange(-128, 128) if broadcast else b_values
    b_shape = (1, 256, 1, 1) if broadcast else (1, 256, 256, 1)
    for sa, za, sb, zb, sy, zy in scale_sets(2, 5):
        a = (sa * (a_values - za)).astype(F32).reshape(1, 256, 256, 1)
        b = (sb * (b_input - zb)).astype(F32).reshape(b_shape)
        assert np.array_equal(nx.ort_quantize_linear(a, sa, za).reshape(-1), a_values)
        assert np.array_equal(nx.ort_quantize_linear(b, sb, zb).reshape(-1), b_input)
        got = run_pairs(mul_model(sa, za, sb, zb, sy, zy, b_shape), a, b, sy, zy, config)
        want = nx.mul_requant(a_values, za, b_values, zb, nx.mul_multiplier(sa, sb, sy), zy, domain_offset=offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))


def add_scale_sets(seed: int, count: int):
    """(sa, za, sb, zb, sy, zy) for Add and Sub: random scales, residual-like ratios, equal scales, power-of-two
    ratios (exact float32 ties), very unbalanced ratios, and zero points at the ends of the range."""
    rng = np.random.default_rng(seed)
    sets = []
    for i in range(count):
        sa = F32(np.exp(rng.uniform(np.log(0.002), np.log(0.5))))
        kind = i % 6
        if kind == 0:
            sb = F32(rng.uniform(0.002, 0.5))
        elif kind == 1:
            sb = F32(sa * rng.uniform(0.2, 5.0))
        elif kind == 2:
            sb = sa
        elif kind == 3:
            sb = F32(sa * 2.0 ** int(rng.integers(-4, 5)))
        elif kind == 4:
            sb = F32(sa * 2.0 ** float(rng.uniform(-14, -6)))
        else:
            sb = F32(sa * 2.0 ** int(rng.integers(6, 12)))
        sy = F32(sa * 2.0 ** int(rng.integers(-2, 3))) if i % 3 == 0 else F32((sa + sb) * rng.uniform(0.3, 2.0))
        za, zb, zy = (int(z) for z in rng.integers(-128, 128, 3))
        if i % 7 == 0:
            za, zb, zy = -128, 127, int(rng.choice([-128, 127]))
        sets.append((sa, za, sb, zb, sy, zy))
    sets.append((F32(0.05), 0, F32(0.05), 0, F32(0.05), 0))  # equal scales, zero zero points: every sum exact
    sets.append((F32(1.0), -128, F32(1.0), -128, F32(2.0 ** 9), 127))  # the output scale far above
    sets.append((F32(2.0 ** -10), 127, F32(2.0 ** -10), -128, F32(2.0 ** -12), -1))  # 4x: most outputs saturate
    return sets


ADD_SETS = add_scale_sets(11, 45)


@pytest.mark.parametrize("domain_offset", [nx.ORT_X86_DOMAIN_OFFSET, 0], ids=["uint8_domain", "int8_domain"])
def test_integer_add_rule_equals_the_float32_qlinearadd_kernel_on_every_pair(domain_offset):
    """Fused Add (QLinearAdd): `add_requant` == `ort_qlinear_add_reference` (two float32 fmas) on all 65,536
    pairs of 48 scale sets, with the operands in either order of onnxruntime's kernel (`swap`)."""
    checked = 0
    for i, (sa, za, sb, zb, sy, zy) in enumerate(ADD_SETS):
        want = nx.ort_qlinear_add_reference(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, domain_offset)
        got = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, domain_offset=domain_offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))
        checked += got.size
        if i % 4 == 0:  # the kernel's first operand is b (a broadcast a)
            want = nx.ort_qlinear_add_reference(PAIRS_B, sb, zb, PAIRS_A, sa, za, sy, zy, domain_offset)
            got = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, swap=True, domain_offset=domain_offset)
            assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))
    assert checked == 48 * 65536


@pytest.mark.parametrize("subtract", [False, True], ids=["add", "sub"])
def test_integer_float_add_rule_equals_the_float32_model_on_every_pair(subtract):
    """Sub, and an Add onnxruntime leaves unfused: `add_requant(fused=False)` == `Q(f32(DQ(a) +/- DQ(b)))`
    (`ort_float_add_reference`) on all 65,536 pairs of 48 scale sets."""
    checked = 0
    for sa, za, sb, zb, sy, zy in ADD_SETS:
        want = nx.ort_float_add_reference(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, subtract)
        got = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, subtract=subtract, fused=False)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))
        checked += got.size
    assert checked == 48 * 65536


@pytest.mark.unit
def test_the_add_rules_differ_where_onnxruntime_does():
    """The fused and the float rule are different functions (zero point before / after rounding, fma): a
    power-of-two ratio with an odd output zero point ties on many pairs."""
    sa, za, sb, zb, sy, zy = F32(0.5), 0, F32(0.5), 0, F32(2.0), 1
    fused = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy)
    unfused = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, fused=False)
    assert np.count_nonzero(fused != unfused) > 1000


def add_model(sa, za, sb, zb, sy, zy, b_shape, op="Add", vector_first=False, fan_out=False) -> onnx.ModelProto:
    """`mul_model` with Add or Sub; `vector_first`: the op's first input is b; `fan_out`: a's QuantizeLinear
    also feeds a second DequantizeLinear (a graph output), which keeps onnxruntime from fusing the Add."""
    model = mul_model(sa, za, sb, zb, sy, zy, b_shape, op)
    graph = model.graph
    if vector_first:
        (node,) = [n for n in graph.node if n.op_type == op]
        node.input[:] = ["b_f", "a_f"]
    if fan_out:
        graph.node.append(helper.make_node("DequantizeLinear", ["a_q", "a_scale", "a_zero_point"], ["a_copy"]))
        graph.output.append(helper.make_tensor_value_info("a_copy", TensorProto.FLOAT, [1, 256, 256, 1]))
    return model


ADD_CASES = {"maps": ((1, 256, 256, 1), False), "vector": ((1, 256, 1, 1), False),
             "vector_first": ((1, 256, 1, 1), True)}


def pair_inputs(sa, za, sb, zb, broadcast: bool):
    a_values, b_values = (PAIRS_B, PAIRS_A) if broadcast else (PAIRS_A, PAIRS_B)  # channel-major either way
    b_input = np.arange(-128, 128) if broadcast else b_values
    a = (sa * (a_values - za)).astype(F32).reshape(1, 256, 256, 1)
    b = (sb * (b_input - zb)).astype(F32).reshape((1, 256, 1, 1) if broadcast else (1, 256, 256, 1))
    assert np.array_equal(nx.ort_quantize_linear(a, sa, za).reshape(-1), a_values)
    assert np.array_equal(nx.ort_quantize_linear(b, sb, zb).reshape(-1), b_input)
    return a, b, a_values, b_values


@pytest.mark.unit
@pytest.mark.parametrize("case", sorted(ADD_CASES))
@pytest.mark.parametrize("config,offset", [({}, nx.ORT_X86_DOMAIN_OFFSET), ({"session.qdqisint8allowed": "1"}, 0)],
                         ids=["default_session", "int8_session"])
def test_add_rule_equals_onnxruntime_on_every_pair(case, config, offset):
    """Every int8 pair through onnxruntime's QLinearAdd: maps, a per-channel vector second, and first (the
    kernel then takes the map first: `swap`)."""
    b_shape, vector_first = ADD_CASES[case]
    broadcast = b_shape != (1, 256, 256, 1)
    for sa, za, sb, zb, sy, zy in ADD_SETS[:6]:
        a, b, a_values, b_values = pair_inputs(sa, za, sb, zb, broadcast)
        got = run_pairs(add_model(sa, za, sb, zb, sy, zy, b_shape, vector_first=vector_first), a, b, sy, zy, config)
        if vector_first:  # the op computes b + a: its first operand (a in add_requant) is the vector
            want = nx.add_requant(b_values, sb, zb, a_values, sa, za, sy, zy, swap=True, domain_offset=offset)
        else:
            want = nx.add_requant(a_values, sa, za, b_values, sb, zb, sy, zy, domain_offset=offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))


@pytest.mark.unit
@pytest.mark.parametrize("op,fan_out", [("Sub", False), ("Add", True)], ids=["sub", "add_with_fan_out"])
@pytest.mark.parametrize("broadcast", [False, True], ids=["maps", "vector"])
def test_float_add_rule_equals_onnxruntime_on_every_pair(op, fan_out, broadcast):
    """Sub (never fused) and an Add whose input has fan-out (not fused in a default x86 session): every int8
    pair equals `add_requant(fused=False)`, and for the Add differs from the fused rule somewhere."""
    b_shape = (1, 256, 1, 1) if broadcast else (1, 256, 256, 1)
    differs = 0
    for sa, za, sb, zb, sy, zy in ADD_SETS[:6] + ADD_SETS[-3:-2]:
        a, b, a_values, b_values = pair_inputs(sa, za, sb, zb, broadcast)
        got = run_pairs(add_model(sa, za, sb, zb, sy, zy, b_shape, op, fan_out=fan_out), a, b, sy, zy, {})
        want = nx.add_requant(a_values, sa, za, b_values, sb, zb, sy, zy, subtract=op == "Sub", fused=False)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))
        if op == "Add":
            differs += np.count_nonzero(got != nx.add_requant(a_values, sa, za, b_values, sb, zb, sy, zy))
    assert op == "Sub" or differs > 0


# ---- the C++ rules --------------------------------------------------------------------------------------

PAIRS_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "ming_numerics.h"

// mul ZA ZB ZY MANTISSA SHIFT OFFSET | add MA MB FIXED SHIFT OFFSET |
// float ZA ZB ZY A_MANTISSA A_ALIGN B_MANTISSA B_ALIGN X_SHIFT X_LIMIT DIVISOR: the int8 result of every (a, b) pair
int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char mode = argv[1][0];
  const int arity = mode == 'm' ? 6 : (mode == 'a' ? 5 : 10);
  if (argc != arity + 2) return 2;
  long long v[10];
  for (int i = 0; i < arity; i++) v[i] = std::strtoll(argv[i + 2], nullptr, 10);
  static int8_t out[65536];
  for (int a = -128; a < 128; a++)
    for (int b = -128; b < 128; b++) {
      const int32_t za = static_cast<int32_t>(v[0]), zb = static_cast<int32_t>(v[1]), zy = static_cast<int32_t>(v[2]);
      int8_t y;
      if (mode == 'm')
        y = ming::mul_requant(a, za, b, zb, static_cast<uint32_t>(v[3]), static_cast<int>(v[4]), zy, static_cast<int32_t>(v[5]));
      else if (mode == 'a')
        y = ming::add_requant<51, 51, 59>(a, b, v[0], v[1], v[2], static_cast<int>(v[3]), static_cast<int32_t>(v[4]));
      else
        y = ming::add_float_requant<28, 28, 58, 26>(a, za, b, zb, v[3], static_cast<int>(v[4]), v[5],
                                                    static_cast<int>(v[6]), static_cast<int>(v[7]), v[8], v[9], zy);
      out[(a + 128) * 256 + b + 128] = y;
    }
  return std::fwrite(out, 1, sizeof out, stdout) == sizeof out ? 0 : 3;
}
"""


@pytest.fixture(scope="module")
def pairs_program(tmp_path_factory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    work = tmp_path_factory.mktemp("pairs")
    (work / "pairs.cpp").write_text(PAIRS_PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-DMING_CSIM", f"-I{TEMPLATES}",
                    "pairs.cpp", "-o", "pairs"], cwd=work, check=True)
    return work / "pairs"


def cpp_pairs(program: Path, *args) -> np.ndarray:
    result = subprocess.run([str(program), *map(str, args)], capture_output=True, check=True)
    return np.frombuffer(result.stdout, np.int8).astype(np.int64)


@pytest.mark.parametrize("offset", [nx.ORT_X86_DOMAIN_OFFSET, 0])
def test_cpp_mul_requant_equals_python_on_every_pair(pairs_program, offset):
    for sa, za, sb, zb, sy, zy in scale_sets(3, 12):
        multiplier = nx.mul_multiplier(sa, sb, sy)
        mantissa, shift = nx.mul_parts(multiplier)
        got = cpp_pairs(pairs_program, "mul", za, zb, zy, mantissa, shift, offset)
        want = nx.mul_requant(PAIRS_A, za, PAIRS_B, zb, multiplier, zy, domain_offset=offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))


@pytest.mark.parametrize("offset", [nx.ORT_X86_DOMAIN_OFFSET, 0])
def test_cpp_add_requant_equals_python_on_every_pair(pairs_program, offset):
    for sa, za, sb, zb, sy, zy in ADD_SETS[::3]:
        c = nx.add_constants(sa, za, sb, zb, sy, zy, offset)
        got = cpp_pairs(pairs_program, "add", c.a_multiplier, c.b_multiplier, c.fixed, c.shift, c.offset)
        want = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, domain_offset=offset)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))


@pytest.mark.parametrize("subtract", [False, True], ids=["add", "sub"])
def test_cpp_add_float_requant_equals_python_on_every_pair(pairs_program, subtract):
    for sa, za, sb, zb, sy, zy in ADD_SETS[::3]:
        c = nx.float_add_constants(sa, sb, sy, subtract)
        got = cpp_pairs(pairs_program, "float", za, zb, zy, c.a_mantissa, c.a_align, c.b_mantissa, c.b_align,
                        c.x_shift, c.x_limit, c.divisor)
        want = nx.add_requant(PAIRS_A, sa, za, PAIRS_B, sb, zb, sy, zy, subtract=subtract, fused=False)
        assert np.array_equal(got, want), (sa, za, sb, zb, sy, zy, np.count_nonzero(got != want))


# ---- networks -------------------------------------------------------------------------------------------

def _mul_maps(g):
    return g.mul(g.conv("x", "conva", 8, pads=1), g.conv("x", "convb", 8, kernel=1), "mul")


def _sub_maps(g):
    difference = g.sub(g.conv("x", "conva", 6, pads=1), g.conv("x", "convb", 6, kernel=1), "sub")
    return g.conv(difference, "conv_out", 6, kernel=1)  # ORT leaves Sub unquantized: its consumer quantizes


def _mul_gemm_vector(g):
    t = g.conv("x", "conv1", 8, pads=1)
    gate = g.relu(g.gemm(g.flatten(g.gap(t, "gap"), "flatten"), "fc", 8), "fc_relu")
    return g.mul(t, g.vector(gate, "unflatten"), "mul")


def _mul_vector_first(g):
    t = g.conv("x", "conv1", 8, pads=1)
    return g.mul(g.conv(g.gap(t, "gap"), "fc", 8, kernel=1), t, "mul")


def _mul_scalar(g):
    t = g.conv("x", "conv1", 8, pads=1)
    return g.mul(t, g.conv(g.gap(t, "gap"), "fc", 1, kernel=1), "mul")


def _add_vector(g):
    t = g.conv("x", "conv1", 8, pads=1)
    return g.add_broadcast(t, g.conv(g.gap(t, "gap"), "fc", 8, kernel=1), "add")


def _sub_vector(g):
    t = g.conv("x", "conv1", 8, pads=1)
    return g.conv(g.sub(t, g.conv(g.gap(t, "gap"), "fc", 8, kernel=1), "sub"), "conv_out", 8, kernel=1)


def _se_network(g):
    t = g.relu(g.conv("x", "conv1", 8, pads=1), "relu1")
    return g.conv(g.se_block(t, "se", 4), "conv2", 8, kernel=1)


def _spatial_attention(g):  # a (1, 1, H, W) map broadcast over the channels: not streamed (yet)
    t = g.conv("x", "conv1", 8, pads=1)
    return g.mul(t, g.conv(t, "attention", 1, kernel=1), "mul")


NETWORKS = {"mul_maps": (_mul_maps, (1, 4, 8, 8)), "sub_maps": (_sub_maps, (1, 4, 8, 8)),
            "mul_gemm_vector": (_mul_gemm_vector, (1, 4, 8, 8)), "mul_vector_first": (_mul_vector_first, (1, 4, 8, 8)),
            "mul_scalar": (_mul_scalar, (1, 4, 8, 8)), "add_vector": (_add_vector, (1, 4, 8, 8)),
            "sub_vector": (_sub_vector, (1, 4, 8, 8)), "se_network": (_se_network, (1, 3, 12, 12)),
            "spatial_attention": (_spatial_attention, (1, 4, 8, 8))}
KIND = {"mul_maps": "mul", "sub_maps": "add"}  # the rest: "broadcast"


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """network(name) -> (quantized model path, lifted graph), built once."""
    directory = tmp_path_factory.mktemp("eltwise")
    cache = {}

    def build(name: str):
        if name not in cache:
            fn, shape = NETWORKS[name]
            g = zoo._Graph(name, shape)
            path = zoo.quantize_float_model(g.finish(fn(g)), directory / f"{name}.onnx", shape)
            cache[name] = path, lift(path)
        return cache[name]

    return build


def network_input(name: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(NETWORKS[name][1]).astype(F32)


def reference_output(graph, x):
    return reference.run(graph, x)[graph.outputs[0].name]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_reference_equals_onnxruntime(network, name):
    path, graph = network(name)
    for seed in SEEDS:
        x = network_input(name, seed)
        assert np.array_equal(reference_output(graph, x), onnxruntime_outputs(path, x)[0]), seed


# every template path: two maps (Add/Sub, Mul), the vector second and first, a scalar, Sub of a vector
@pytest.mark.parametrize("name", ["mul_maps", "sub_maps", "mul_vector_first", "mul_scalar", "sub_vector", "se_network"])
def test_csim_equals_reference(network, name, tmp_path):
    _, graph = network(name)
    stream_graph = stream_graph_of(graph)
    operators = [p for p in stream_graph.processes if p.kind in ("add", "mul", "broadcast")]
    assert [p.kind for p in operators] == [KIND.get(name, "broadcast")]
    x = network_input(name, 5)
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), reference_output(graph, x))


@pytest.mark.parametrize("name", ["se_network", "mul_scalar", "mul_maps"])
def test_concurrent_csim_with_the_built_fifos_runs_without_deadlock(network, name, tmp_path):
    """The ILP's schedule with the FIFO depths `ming build` gives them, every process on its own thread."""
    _, graph = network(name)
    _, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    x = network_input(name, 6)
    assert np.array_equal(csim(graph, tmp_path / "out", x, solution.schedule, concurrent=True),
                          reference_output(graph, x))


def test_a_map_broadcast_over_channels_is_refused_with_one_line(network):
    """The golden model computes it (see test_reference_equals_onnxruntime); streaming refuses it."""
    _, graph = network("spatial_attention")
    with pytest.raises(MingError) as caught:
        stream_graph_of(graph)
    assert str(caught.value).startswith("layer ") and "not supported" in str(caught.value)
    assert "\n" not in str(caught.value)


def se_map_channel(stream_graph) -> str:
    (broadcast,) = [p for p in stream_graph.processes if p.kind == "broadcast"]
    (name,) = [c for c in broadcast.inputs if stream_graph.channels[c].pixels > 1]
    return name


def test_the_squeeze_and_excitation_map_fifo_holds_the_whole_image(network):
    _, graph = network("se_network")
    stream_graph = stream_graph_of(graph)
    channel = stream_graph.channels[se_map_channel(stream_graph)]
    assert depths_in_pixels(stream_graph)[channel.name] == channel.pixels == 144
    _, solution, _ = explore(build_stream_graph(graph), BuildOptions())
    schedule = solution.schedule
    assert schedule.depth_of(channel.name) * schedule.lanes_of(channel.name) >= channel.values
    reserved = fifo_bits(stream_graph)[channel.name]  # the ILP's budget holds it before it chooses
    assert reserved >= channel.values * 8 and solution.totals["fifo_bits"] >= channel.values * 8
    # `ming simulate` steps through the same loops: it completes with these depths, not with half an image
    board = load_board("kv260")
    assert simulate(report(stream_graph, schedule, board, solution)).completed
    half = replace(schedule, depths=schedule.depths | {channel.name: channel.values // 2 // schedule.lanes_of(channel.name)})
    assert simulate(report(stream_graph, half, board, solution)).deadlock


def test_half_an_image_in_the_map_fifo_deadlocks(network, tmp_path):
    _, graph = network("se_network")
    stream_graph = stream_graph_of(graph)
    channel = stream_graph.channels[se_map_channel(stream_graph)]
    depths = {c: 2 for c in stream_graph.channels} | {channel.name: channel.values // 2}
    with pytest.raises(CsimDeadlock) as caught:
        csim(graph, tmp_path / "out", network_input("se_network", 0), Schedule(depths=depths), concurrent=True)
    assert any(channel.name in line and "(full" in line for line in caught.value.report), caught.value.report
