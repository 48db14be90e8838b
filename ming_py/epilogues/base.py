"""What an epilogue rule is: everything about one way a process turns its accumulators or input values into
int8 outputs, and the registry the golden model, the storage plan, the cost model and the emitter ask.

The epilogue's parameters are the graph IR's (`ming_py.ir`: `AccRequant`, `FixedPointRequant`, ...; the
frontends build them). A rule (`EpilogueRule`, one per IR class) holds, for its IR class:

* `golden`: the golden model's integer rule (`ming_py.reference` evaluates the graph with it; the emitted
  C++ must equal it bit for bit);
* `arrays`: its per-channel (or per-count) constant ROMs, with their layout;
* `datapath`: the requantization datapath its lanes carry (named in report.json), whose cost per lane is
  `LANE_COST`;
* `emit`: its C++ values and constant arrays (`emit.hls`), the C++ call chosen by the name it gives
  `view.epilogue` (emit/templates/epilogues/<name>.j2).

`register` refuses a rule that leaves an aspect undefined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

# (LUT, DSP) of one requantization lane by datapath
LANE_COST = {"lean": (200, 2), "lean, shift by channel": (450, 2), "exact": (1200, 3), "fixed point": (150, 2),
             # TFLite's rule: a 32 x 31-bit product (four DSP48E2 tiles), rounding, shift and clamp
             "fixed point 32 x 32": (300, 4),
             # Mul: an 8 x 8 and a 17 x 24-bit product, two 56-bit float32 roundings (mask and add)
             "float32 product": (300, 2),
             # an average by a power of two: the rounding of a shift by a constant (wiring), a compare of
             # the bits shifted out with one half and an increment, the zero point and the saturation
             "shift": (60, 0)}
# LUTs of the lean datapath's 24 x 27-bit product built in fabric (a process with fabric multipliers)
LEAN_PRODUCT_IN_FABRIC = 430


def lane_cost(datapath: str, multipliers: str) -> tuple[int, int]:
    """(LUT, DSP) of one requantization lane of `datapath` in a process whose products are `multipliers`."""
    lut, dsp = LANE_COST[datapath]
    if multipliers == "fabric" and datapath.startswith("lean"):
        return lut + LEAN_PRODUCT_IN_FABRIC, 0
    return lut, dsp


@dataclass(frozen=True)
class Golden:
    """What a rule's golden model may ask of the kernel it ends: `per_channel(values)` broadcasts
    per-output-channel constants over the result, `valid()` counts each output's unpadded window
    elements, `parallel` is the kernel's parallel loop dims in the result's axis order."""

    per_channel: Callable[[np.ndarray], np.ndarray]
    valid: Callable[[], np.ndarray]
    parallel: tuple[int, ...]


class EpilogueRule:
    ir_type: type = None  # the `ming_py.ir` class it serves (type(None): no epilogue)

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
        """The requantization datapath of its lanes (a key of `LANE_COST`); None: no requantizer."""
        raise NotImplementedError

    def emit(self, e, view, constant) -> None:
        """Sets `view.epilogue` (the C++ call's template) and its values in `view.extra`; each constant array
        goes to `constant(role, ctype, array, comment)`, in the order of `arrays`."""
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
