"""What an epilogue rule is: everything about one way a process turns its accumulators or input values into
int8 outputs, and the registry the golden model, the storage plan, the cost model and the emitter ask.

The epilogue's parameters are the graph IR's (`ming_py.ir`: `AccRequant`, `FixedPointRequant`, ...; the
frontends build them). A rule (`EpilogueRule`, one per IR class) holds, for its IR class:

* `golden`: the golden model's integer rule (`ming_py.reference` evaluates the graph with it; the emitted
  C++ must equal it bit for bit);
* `arrays`: its per-channel (or per-count) constant ROMs, with their layout;
* `datapath`: the requantization datapath its lanes carry (named in report.json), whose cost per lane is its
  calibrated primitive's (`LANE_PRIMITIVES`);
* `emit`: its C++ values (an `EpilogueValues`, which names the template of its C++ call,
  emit/templates/epilogues/<template>.j2) and constant arrays (`emit.hls`).

`register` refuses a rule that leaves an aspect undefined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from ming_py import numerics, primitives

# TFLite's fixed-point rule (ming::requantize_fixed_point) with its multiplier and shift constants of the code (the
# C++ passes them: ADD, MUL, an average over the whole map), and with them read from the rule's ROMs (per channel
# after a MAC, by the valid count of a window's average): `lane_datapath` tells them apart
FIXED_POINT = "fixed point 32 x 32"
FIXED_POINT_FROM_ROMS = "fixed point 32 x 32, multiplier and shift from ROMs"

# The calibrated primitive (`ming_py.primitives`, benchmarks/calibration/) of one requantization lane by datapath
LANE_PRIMITIVES = {
    "lean": "requant_lean_dsp",  # ming::requantize_lean: a 24 x 27-bit product, rounding at the float32 bit
    "lean, shift by channel": "requant_lean_dsp_shift_by_channel",  # and a barrel shifter
    "exact": "requant_exact",  # ming::requantize: the float32 emulation
    # ming::add_requant (QLinearAdd): two 9 x 24-bit products, two float32 roundings, a rounding at a constant shift
    "sum of two products": "requant_add",
    # ming::add_float_requant (Sub, unfused Add): two 9 x 24-bit products, three float32 roundings, a 10-step division
    "float sum": "requant_add_float",
    # ming::average_level (QLinearAveragePool): a clamp, a 16 x 26-bit product, a threshold compare
    "float average": "average_level",
    # TFLite's rule: a 32 x 32-bit product, rounding, shift; its multiplier and shift constants of the code
    FIXED_POINT: "requant_fixed_point",
    FIXED_POINT_FROM_ROMS: "requant_fixed_point_rom",  # or read from ROMs: a variable rounding and shift
    "float32 product": "requant_mul",  # ming::mul_requant: an 8 x 8 and a 17 x 24-bit product, two roundings
    "shift": "requant_shift",  # ming::requantize_shift: a rounding shift by a constant
    # ming::requantize_narrow (TFLite's rule, proved): a clamp, an 18 x 26-bit product and the rounding in one DSP48E2
    "narrow": "requant_narrow_dsp",
    "narrow, 27-bit operand": "requant_narrow_wide_dsp",  # where the layer's accumulators span more: two DSP48E2
}
# the lean datapath with its product in LUT fabric (a process whose multipliers are "fabric")
LEAN_IN_FABRIC = "requant_lean_fabric"
# the narrow datapaths with their products in LUT fabric
NARROW_IN_FABRIC = {"narrow": "requant_narrow_fabric", "narrow, 27-bit operand": "requant_narrow_wide_fabric"}


def lane_cost(datapath: str, multipliers: str) -> tuple[int, int]:
    """(LUT, DSP) of one requantization lane of `datapath` in a process whose products are `multipliers`, as
    synthesized (`ming_py.primitives`). With fabric multipliers the lean and narrow datapaths' products are in
    LUTs too (a shift by channel adds its barrel shifter as with DSPs)."""
    primitive = LANE_PRIMITIVES[datapath]
    lut, dsp = primitives.lut(primitive), primitives.dsp(primitive)
    if multipliers == "fabric" and datapath.startswith("lean"):
        return lut - primitives.lut("requant_lean_dsp") + primitives.lut(LEAN_IN_FABRIC), 0
    if multipliers == "fabric" and datapath in NARROW_IN_FABRIC:
        return primitives.lut(NARROW_IN_FABRIC[datapath]), 0
    return lut, dsp


def lane_datapath(epilogue, arrays: dict) -> str | None:
    """The datapath of a process's requantization lanes (a key of `LANE_PRIMITIVES`; None: no requantizer): its
    rule's, the fixed-point rule's read from ROMs where the process's arrays (`ming_py.storage.plan_arrays`, by
    role) hold the ROMs its rule names in `multiplier_roms`, the arrays its C++ call then reads."""
    rule = rule_of(epilogue)
    datapath = rule.datapath(epilogue)
    if datapath == FIXED_POINT and any(role in arrays for role in rule.multiplier_roms):
        return FIXED_POINT_FROM_ROMS
    return datapath


@dataclass(frozen=True)
class CppScalar:
    """A scalar an epilogue's C++ call passes by name, declared once at the top of its process function
    (`constants` in emit/templates/process/macros.j2)."""

    name: str
    ctype: str
    value: int
    comment: str = ""

    @property
    def declaration(self) -> str:
        text = f"constexpr {self.ctype} {self.name} = {self.value};"
        return f"{text}  // {self.comment}" if self.comment else text


# (attribute, C++ name, C++ type, comment) of the scalars most rules pass
OUTPUT_ZERO_POINT = ("zero_point", "OUTPUT_ZERO_POINT", "int32_t", "")
OUTPUT_QMIN = ("qmin", "OUTPUT_QMIN", "int32_t", "")
OUTPUT_QMAX = ("qmax", "OUTPUT_QMAX", "int32_t", "")
INPUT_ZERO_POINT = ("x_zero_point", "INPUT_ZERO_POINT", "int32_t", "")


@dataclass(frozen=True)
class EpilogueValues:
    """The values an epilogue's C++ call needs (`ProcessView.epilogue_values`): each rule's subclass adds its
    own. `template` names the call's template (emit/templates/epilogues/<template>.j2; "max": the running
    maximum is the output)."""

    template: str
    # the scalars its template passes by name (`CppScalar`): (attribute or attribute.field, C++ name, C++ type,
    # comment); one whose value is None is not declared (the call reads it from a ROM or does not pass it)
    scalars: ClassVar[tuple[tuple[str, str, str, str], ...]] = ()

    def cpp_scalars(self) -> tuple[CppScalar, ...]:
        declared = []
        for path, name, ctype, comment in self.scalars:
            value = self
            for attribute in path.split("."):
                value = None if value is None else getattr(value, attribute)
            if value is not None:
                declared.append(CppScalar(name, ctype, int(value), comment))
        names = [scalar.name for scalar in declared]
        if len(set(names)) != len(names):
            raise ValueError(f"{type(self).__name__}: a C++ name declared twice in {names}")
        return tuple(declared)


# the narrow datapath's (`numerics.NarrowRequant`) one shift, clamp and center
NARROW_SCALARS = (("narrow.shift", "REQUANT_SHIFT", "int", "right shift of the narrow datapath's product"),
                  ("narrow.low", "NARROW_LOW", "int32_t", "the narrow datapath clamps the accumulator to "
                                                         "[NARROW_LOW, NARROW_HIGH]"),
                  ("narrow.high", "NARROW_HIGH", "int32_t", ""),
                  ("narrow.center", "NARROW_CENTER", "int32_t", "subtracted from the clamped accumulator"))


@dataclass(frozen=True)
class ShiftValues(EpilogueValues):
    """A rounding shift by a constant, no product (`ming::requantize_shift`): of the sum plus `offset`."""

    scalars = (("shift", "REQUANT_SHIFT", "int", "the multiplier is 2^-REQUANT_SHIFT"), OUTPUT_ZERO_POINT)

    shift: int
    zero_point: int
    offset: int = 0


@dataclass(frozen=True)
class FixedPointValues(EpilogueValues):
    """TFLite's fixed-point rule (`ming::requantize_fixed_point`), by the narrow datapath where `narrow`."""

    scalars = (("shift", "REQUANT_SHIFT", "int", "right shift of the 64-bit product"),) + NARROW_SCALARS + \
        (OUTPUT_ZERO_POINT, OUTPUT_QMIN, OUTPUT_QMAX)

    zero_point: int
    double_round: bool
    qmin: int
    qmax: int
    multiplier: int | None = None  # constants of the code (None: from the rule's ROMs)
    shift: int | None = None
    domain: int = 0  # added to the sum: a legacy uint8 model's offset of its values
    narrow: numerics.NarrowRequant | None = None  # the narrow datapath's constants


@dataclass(frozen=True)
class Golden:
    """What a rule's golden model may ask of the kernel it ends: `per_channel(values)` broadcasts
    per-output-channel constants over the result, `valid()` counts each output's unpadded window
    elements, `parallel` is the kernel's parallel loop dims in the result's axis order, `span_scalar` its
    inputs that do not vary along the innermost dim."""

    per_channel: Callable[[np.ndarray], np.ndarray]
    valid: Callable[[], np.ndarray]
    parallel: tuple[int, ...]
    # the kernel's inputs that hold one value along its innermost dim (a per-channel vector or a scalar):
    # onnxruntime's broadcast runs them as a scalar per span, and QLinearAdd takes the other operand first
    span_scalar: tuple[int, ...] = ()


class EpilogueRule:
    ir_type: type = None  # the `ming_py.ir` class it serves (type(None): no epilogue)
    # the roles of its arrays the requantizer reads its multiplier and shift from, where its `arrays` declare them
    # (none: they are constants of the code)
    multiplier_roms: tuple[str, ...] = ()

    def golden(self, e, result, context: Golden) -> np.ndarray:
        """The int8 outputs (int64 array) from the kernel's int64 `result` (a tuple of its gathered inputs
        for rules that read the inputs themselves)."""
        raise NotImplementedError

    def reads_inputs(self) -> bool:
        """Whether the golden rule reads the kernel's inputs directly rather than its payload's result."""
        raise NotImplementedError

    def arrays(self, e, spec) -> dict:
        """Its constant ROMs by role (`ming_py.array_layout.ArrayPlan`), in declaration order."""
        raise NotImplementedError

    def datapath(self, e) -> str | None:
        """The requantization datapath of its lanes (a key of `LANE_PRIMITIVES`, `FIXED_POINT` for both sources of
        its multiplier and shift: `lane_datapath` has the process's); None: no requantizer."""
        raise NotImplementedError

    def emit(self, e, view, constant) -> EpilogueValues | None:
        """Its values for the C++ (None: its process's template needs none); each constant array goes to
        `constant(role, ctype, array, comment)`, in the order of `arrays`. `view`: the process's
        `emit.hls.ProcessView`, read only."""
        raise NotImplementedError


ASPECTS = ("ir_type", "golden", "reads_inputs", "arrays", "datapath", "emit")

_REGISTRY: dict[type, EpilogueRule] = {}


def register(cls: type[EpilogueRule]) -> type[EpilogueRule]:
    missing = [a for a in ASPECTS if getattr(cls, a) is getattr(EpilogueRule, a)]
    if missing:
        raise TypeError(f"epilogue rule {cls.__name__} does not define {', '.join(missing)}")
    if cls.ir_type in _REGISTRY:
        raise TypeError(f"epilogue rule for {cls.ir_type.__name__} is registered twice")
    _REGISTRY[cls.ir_type] = cls()
    return cls


def rule_of(epilogue) -> EpilogueRule:
    try:
        return _REGISTRY[type(epilogue)]
    except KeyError:
        raise TypeError(f"unknown epilogue {type(epilogue).__name__}") from None


def registered() -> dict[type, EpilogueRule]:
    return dict(_REGISTRY)


def per_tile(values: np.ndarray, lanes: int) -> np.ndarray:
    """Per-output-channel constants as [output tile][lane]."""
    return values.reshape(-1, lanes)


def rom_word(values: np.ndarray) -> str:
    """The C++ word of a constant table wider than int32: `ming::rom_uint` / `ming::rom_int` of its values' range
    (ming_widths.h), so that no table is a 64-bit ROM where its values need fewer bits."""
    low, high = int(np.min(values)), int(np.max(values))
    return f"ming::rom_uint<{high}>" if low >= 0 else f"ming::rom_int<{low}, {high}>"
