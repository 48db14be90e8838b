"""Read TOSA's integer requantization chains (TFLite int8 models) as ming epilogues.

After a convolution or matrix product IREE's TOSA lowering leaves a chain of
element-wise integer generics: the bias addition, the input zero-point
correction, the RESCALE (64-bit multiply by a Q31 multiplier, rounding with
TFLite's double rounding, shift, output zero point, clamp) and the clamp of a
fused activation. `requant_of` reads the chain's parameters from its bodies,
then proves the reading: the chain, evaluated exactly (`int_body`), must equal
`numerics.fixed_point_requantize` with those parameters on every probe value
(zero, ones, every power of two and its neighbours, the int32 extremes and
random values of every magnitude) in every channel.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ming_py import numerics
from ming_py.errors import MingError
from ming_py.ir import FixedPointAdd, FixedPointAverage, FixedPointRequant

from . import int_body


def probes() -> np.ndarray:
    """int32 accumulator values a requantization is checked on."""
    powers = np.array([1 << k for k in range(31)], dtype=np.int64)
    edges = np.concatenate([powers, powers - 1, powers + 1, [0, (1 << 31) - 1]])
    rng = np.random.default_rng(0)
    spread = np.concatenate([rng.integers(-(1 << k), 1 << k, 48) for k in range(1, 32)])
    values = np.concatenate([edges, -edges, [-(1 << 31)], spread])
    return np.unique(numerics.wrap_i32(values))


def run_steps(steps, values: np.ndarray, channels: int, indices: list | None = None) -> np.ndarray:
    """The chain's result for `values` of shape (probes, channels) (at the iteration point `indices`, for
    bodies that read their position)."""
    for step in steps:
        args: list = [None] * (len(step.constants) + 2)
        args[step.position] = values
        for index, array in step.constants:
            args[index] = _per_channel(array, channels)
        args[-1] = np.int64(0)  # the destination (outs) is not read by element-wise bodies
        values = np.broadcast_to(int_body.evaluate(step.block, args, indices, where=step.where)[None],
                                 (values.shape[0], channels))
    return values


def _per_channel(array: np.ndarray, channels: int) -> np.ndarray:
    """A constant varying along the channel axis at most, as (1, channels) or (1, 1)."""
    flat = np.asarray(array, dtype=np.int64).reshape(-1)
    return flat.reshape(1, -1) if flat.size == channels else flat[:1].reshape(1, 1)


# Output channels whose requantization is proved at once: the proof evaluates the chain on (probes, channels)
# int64 arrays, one per value its bodies compute (a few dozen alive at once), and `probes` has about 1,700
# values, so a block of 512 channels keeps each array near 7 MB and the proof within a few hundred MB however
# wide the layer (all its channels at once took 1.5 GB at 10,000 channels and exhausted the memory at 80,000).
CHANNEL_BLOCK = 512


def requant_of(chain, channel_dims: tuple[int, ...], channels: int, where: str) -> FixedPointRequant:
    """The epilogue the chain computes on the accumulator of a kernel with `channels` output channels
    (indexed by its loop dims `channel_dims`), proved CHANNEL_BLOCK channels at a time."""
    values = probes()
    blocks = []
    for start in range(0, channels, CHANNEL_BLOCK):
        stop = min(start + CHANNEL_BLOCK, channels)
        x = np.broadcast_to(values.reshape(-1, 1), (values.size, stop - start))
        blocks.append(_proved_parameters(_channel_block(chain.steps, start, stop, channels), x, where))
    bias, multiplier, shift = (np.concatenate([block[i] for block in blocks]) for i in range(3))
    zero_point, low, high = blocks[0][3], blocks[0][5], blocks[0][6]
    roundings = set.intersection(*(block[4] for block in blocks))
    _check_shared(blocks, roundings, where)
    return FixedPointRequant(bias.astype(np.int32), multiplier.astype(np.int32), shift.astype(np.int32),
                             zero_point, channel_dims, max(roundings), low, high)


def _check_shared(blocks, roundings: set, where: str) -> None:
    """Refuse, naming them, the parameters a requantization applies to every channel that differ between
    blocks of channels (`_proved_parameters` tuples): the output zero point, the clamp and the rounding."""
    first = blocks[0]
    differing = [name for name, same in (
        ("output zero point", all(block[3] == first[3] for block in blocks)),
        ("clamp", all((block[5], block[6]) == (first[5], first[6]) for block in blocks)),
        ("rounding", bool(roundings))) if not same]
    if differing:
        verb = "differs" if len(differing) == 1 else "differ"
        raise MingError(f"{where}: the requantization's {' and '.join(differing)} {verb} between output channels; "
                        "ming applies one output zero point, one clamp (the fused activation) and one rounding to "
                        "all of a layer's channels (per-channel scales and biases are fine): quantize the layer's "
                        "output per tensor, with one activation")


def _channel_block(steps, start: int, stop: int, channels: int) -> list:
    """The chain's steps restricted to output channels [start, stop): per-channel constants sliced, the
    others as one value."""
    def sliced(array: np.ndarray) -> np.ndarray:
        flat = np.asarray(array).reshape(-1)
        return flat[start:stop] if flat.size == channels else flat[:1]

    return [replace(step, constants=tuple((index, sliced(array)) for index, array in step.constants))
            for step in steps]


def add_of(a, b, steps, where: str) -> FixedPointAdd:
    """TFLite's ADD from the chains that scale each int8 input and the chain after their sum; checked on
    every pair of input values."""
    values = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1)
    tables = [run_steps(chain.steps, values, 1)[:, 0] for chain in (a, b)]
    sums = numerics.wrap_i32(tables[0].reshape(-1, 1) + tables[1].reshape(1, -1)).reshape(-1, 1)
    bias, multiplier, shift, zero_point, double_round, low, high = requant_parameters(steps, sums, where)
    if bias.any():
        raise MingError(f"{where}: an offset after the sum of an Add is not supported")
    return FixedPointAdd(tables[0].astype(np.int32), tables[1].astype(np.int32), int(multiplier[0]), int(shift[0]),
                         zero_point, double_round, low, high)


def requant_parameters(steps, x: np.ndarray, where: str):
    """(bias [C], multiplier [C], shift [C], zero point, double rounding, qmin, qmax) of a chain of int32
    steps (a bias addition), a RESCALE to int8 and int8 clamps, proved on the values `x` (probes, C)."""
    bias, multiplier, shift, zero_point, roundings, low, high = _proved_parameters(steps, x, where)
    return bias, multiplier, shift, zero_point, max(roundings), low, high


def _proved_parameters(steps, x: np.ndarray, where: str):
    """`requant_parameters` with the set of double-rounding choices that give the chain's values (never
    empty)."""
    steps = list(steps)
    channels = x.shape[1]
    split = next((i for i, s in enumerate(steps) if s.dtype == "i8"), None)
    if split is None or any(s.dtype != "i32" for s in steps[:split]) or any(s.dtype != "i8" for s in steps[split:]):
        raise MingError(f"{where}: unsupported integer chain before an int8 result")
    bias = np.broadcast_to(run_steps(steps[:split], np.zeros((1, channels), np.int64), channels)[0], channels)
    accumulated = run_steps(steps[:split], x, channels)
    if not np.array_equal(accumulated, numerics.wrap_i32(x + bias)):
        raise MingError(f"{where}: the integer steps before the requantization are not a bias addition")
    multiplier, shift, zero_point, low, high = _rescale_parameters(steps[split], accumulated, channels)
    clamp_low, clamp_high = _clamp_of(steps[split + 1:], channels, where)
    low, high = max(low, clamp_low), min(high, clamp_high)
    expected = run_steps(steps[split:], accumulated, channels)
    roundings = {double_round for double_round in (True, False) if np.array_equal(
        numerics.fixed_point_requantize(accumulated, multiplier, shift, double_round, zero_point, low, high), expected)}
    if not roundings:
        raise MingError(f"{where}: IREE's requantization differs from TFLite's fixed-point rule; not supported")
    return bias, multiplier, shift, zero_point, roundings, low, high


def _rescale_parameters(step, values: np.ndarray, channels: int, indices: list | None = None):
    """(multiplier [C], shift [C], zero point, low, high) read from a RESCALE body (at `indices`)."""
    ops = list(step.block.operations)
    args: list = [None] * (len(step.constants) + 2)
    for index, array in step.constants:
        args[index] = _per_channel(array, channels)
    args[-1] = np.int64(0)
    envs = []
    for sample in (values[:1], values[-1:]):
        args[step.position] = sample
        envs.append(int_body.evaluate(step.block, args, indices, where=step.where))
    products = [op for op in ops if op.operation.name == "arith.muli" and str(op.results[0].type) == "i64"]
    # the shift is the one an int32 truncation reads; with a constant shift of 32 IREE makes it logical
    # (`shrui`: the same low 32 bits); `requant_parameters` and `average_of` prove the reading either way
    narrowed = [getattr(op.operands[0].owner, "operation", None) for op in ops if op.operation.name == "arith.trunci"
                and str(op.operands[0].type) == "i64" and str(op.results[0].type) == "i32"]
    shifts = [op for op in narrowed if op is not None and op.name in ("arith.shrsi", "arith.shrui")]
    if len(products) != 1 or len(shifts) != 1:
        raise MingError(f"{step.where}: not a TOSA RESCALE body")
    fixed = [v for v in products[0].operands if np.array_equal(envs[0][v], envs[1][v])]
    if len(fixed) != 1:
        raise MingError(f"{step.where}: not a TOSA RESCALE body")
    multiplier = np.broadcast_to(np.broadcast_to(envs[0][fixed[0]], (1, channels))[0], channels)
    shift = np.broadcast_to(np.broadcast_to(envs[0][shifts[0].operands[1]], (1, channels))[0], channels)

    def i32(op) -> bool:
        return str(op.results[0].type) == "i32"

    # the scaled value: the product's shifted sum truncated to int32; then + zero point, then the clamp
    truncated = {op.results[0] for op in ops if op.operation.name == "arith.trunci" and i32(op)
                 and str(op.operands[0].type) == "i64"}
    zero_point = next((int(envs[0][b]) for op in ops if op.operation.name == "arith.addi" and i32(op)
                       for a, b in (op.operands, op.operands[::-1]) if a in truncated and np.size(envs[0][b]) == 1),
                      0)
    low = max((int(c) for op in ops if op.operation.name == "arith.maxsi" and i32(op) for v in op.operands
               if (c := int_body.defining_constant(v)) is not None), default=-128)
    high = min((int(c) for op in ops if op.operation.name == "arith.minsi" and i32(op) for v in op.operands
                if (c := int_body.defining_constant(v)) is not None), default=127)
    return multiplier.astype(np.int64), shift.astype(np.int64), zero_point, low, high


def _clamp_of(steps, channels: int, where: str) -> tuple[int, int]:
    """The bounds of int8 steps that clamp (a fused Relu/Relu6: TOSA CLAMP), checked on all 256 values."""
    if not steps:
        return -128, 127
    values = np.broadcast_to(np.arange(-128, 128, dtype=np.int64).reshape(-1, 1), (256, channels))
    result = run_steps(steps, values, channels)
    low, high = int(result[0, 0]), int(result[-1, 0])
    if not np.array_equal(result, np.clip(values, low, high)):
        raise MingError(f"{where}: int8 steps after the requantization that are not a clamp are not supported")
    return low, high


def average_of(step_chain, valid: np.ndarray, where: str) -> FixedPointAverage:
    """TFLite's AVERAGE_POOL_2D from the chain after a window sum; `valid` holds the number of unpadded
    window elements at every output position (the chain's iteration space, without the channel axis).
    The chain's per-position multiplier and shift must depend on that number alone, and for each number
    the chain must equal the fixed-point rule on every sum the window can hold."""
    steps = list(step_chain.steps)
    if len(steps) != 1 or steps[0].dtype != "i8":
        raise MingError(f"{where}: unsupported integer arithmetic after a window sum")
    step = steps[0]
    window = int(valid.max())
    multiplier = np.zeros(window + 1, np.int64)
    shift = np.zeros(window + 1, np.int64)
    zero_point, double_round, low, high = 0, False, -128, 127
    for count in np.unique(valid):
        positions = np.argwhere(valid == count)
        sums = np.arange(-128 * count, 127 * count + 1, dtype=np.int64).reshape(-1, 1)
        readings = set()
        for position in positions:
            indices = list(position) + [0]
            parameters = _rescale_parameters(step, sums, 1, indices)
            readings.add((int(parameters[0][0]), int(parameters[1][0])) + parameters[2:])
        if len(readings) != 1:
            raise MingError(f"{where}: the average's divisor depends on more than the number of valid elements")
        (m, s, zero_point, low, high), = readings
        multiplier[count], shift[count] = m, s
        expected = run_steps([step], sums, 1, list(positions[0]) + [0])
        matches = [dr for dr in (False, True) if np.array_equal(
            numerics.fixed_point_requantize(sums, m, s, dr, zero_point, low, high), expected)]
        if not matches:
            raise MingError(f"{where}: IREE's average differs from TFLite's fixed-point rule; not supported")
        double_round = matches[0]
    return FixedPointAverage(multiplier.astype(np.int32), shift.astype(np.int32), zero_point, double_round,
                             low, high)
