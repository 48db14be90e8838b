"""A function of one int8 value, tabulated for its 256 values: onnxruntime's DequantizeLinear ->
QuantizeLinear between two scales with a clamp (`Rescale`), or an activation between them (`LookupTable`,
one table per channel where it differs by channel). The tables fill the table kind's ROM
(`ming_py.kinds.table`)."""

from __future__ import annotations

import numpy as np

from ming_py import numerics
from ming_py.ir import LookupTable, Rescale

from .base import EpilogueRule, register


class TableRule(EpilogueRule):
    def reads_inputs(self):
        return True

    def arrays(self, e, spec):
        return {}

    def datapath(self, e):
        return None

    def tables(self, e) -> tuple[np.ndarray, str]:
        """Its tables [1 or channels][256] and what they compute."""
        raise NotImplementedError

    def emit(self, e, view, constant):
        tables, what = self.tables(e)
        lanes, per_lane = view.out_lanes[0], view.kind_values.tables_per_lane
        # lane l of the t-th token of a pixel carries channel t * lanes + l
        channels = np.broadcast_to(tables, (per_lane * lanes, 256)) if len(tables) == 1 else tables
        rom = channels.reshape(per_lane, lanes, 256).transpose(1, 0, 2).reshape(view.storage["table"].shape)
        layout = "one copy per lane" if len(tables) == 1 else \
            "[lane][token of a pixel][value]: the table of each channel the lane carries"
        constant("table", "int8_t", rom.astype(np.int8), f"{what} for every int8 value (index + 128); {layout}")
        return None


@register
class OnnxRescale(TableRule):
    ir_type = Rescale

    def golden(self, e, result, context):
        table = numerics.rescale_table(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point)
        return np.clip(numerics.apply_table(result[0], table), e.qmin, e.qmax)

    def tables(self, e):
        tables = np.clip(numerics.rescale_table(e.x_scale, e.x_zero_point, e.y_scale, e.zero_point), e.qmin,
                         e.qmax)[None]
        return tables, f"onnxruntime's DequantizeLinear -> QuantizeLinear, clamped to [{e.qmin}, {e.qmax}],"


@register
class Activation(TableRule):
    ir_type = LookupTable

    def golden(self, e, result, context):
        parallel = context.parallel
        groups = np.zeros((1,) * len(parallel), dtype=np.int64)
        if e.groups > 1:
            shape = [1] * len(parallel)
            shape[parallel.index(e.channel_dim)] = -1  # one table per channel
            groups = np.arange(e.groups).reshape(shape)
        return e.table.astype(np.int64)[groups, result[0] + 128]

    def tables(self, e):
        # TFLite's builtin operators are upper case (LOGISTIC, MUL; lift_tosa names a table that is no
        # operator's RESCALE), ONNX operator types are not (Sigmoid, PRelu): the frontends keep both as they are
        if e.function.isupper():
            return e.table, f"TFLite's int8 {e.function}"
        return e.table, f"onnxruntime's DequantizeLinear -> {e.function} -> QuantizeLinear"
