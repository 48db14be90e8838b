"""The streaming dataflow IR: processes connected by FIFO channels, and the schedule.

`line_buffers` builds a `StreamGraph` from a `Graph`; `ilp` chooses a `Schedule`
for it; `emit` turns both into HLS C++. Every channel carries the pixels of a
(channels, height, width) map in raster order, the channels of a pixel split
into tokens of `lanes` int8 values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .array_layout import FifoStorage, fifo_storage
from .ir import Epilogue, HostOp

GROUP_LOOP = "g"  # a grouped conv's groups in one output token, unrolled before its kind's own loops


@dataclass(frozen=True)
class Channel:
    """A FIFO between two processes; `producer`/`consumer` are process names, or
    "input"/"output" for the accelerator's own ports."""

    name: str
    producer: str
    consumer: str
    channels: int
    height: int
    width: int

    @property
    def pixels(self) -> int:
        return self.height * self.width

    @property
    def values(self) -> int:
        return self.channels * self.height * self.width


@dataclass(frozen=True)
class Window:
    """Geometry of a sliding-window (or 1x1 strided) process, in input coordinates; a pad process's is
    a 1x1 window over its padded map."""

    in_channels: int
    in_height: int
    in_width: int
    out_channels: int
    out_height: int
    out_width: int
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    pad_value: int = 0
    # of a conv or 1x1 conv: its channels split into `groups` groups, output channel o reading the input
    # channels of group o // (out_channels / groups) (1 for every other kind)
    groups: int = 1

    @property
    def window_size(self) -> int:
        return self.kernel[0] * self.kernel[1]

    @property
    def line_buffer_rows(self) -> int:
        """Rows kept: the (K_h - 1) * dilation previous rows and the current one."""
        return (self.kernel[0] - 1) * self.dilation[0] + 1

    @property
    def padded_height(self) -> int:
        return self.in_height + self.pads[0] + self.pads[2]

    @property
    def padded_width(self) -> int:
        return self.in_width + self.pads[1] + self.pads[3]


@dataclass(frozen=True)
class KindParams:
    """The base of the parameters a process kind owns (`ProcessKind.params_type`, a frozen subclass): a split's
    routes, a permute's order, a bilinear resize's tables. The saved design names the subclass
    (`ming_py.dataclass_codec`)."""


@dataclass(eq=False)
class Process:
    name: str
    kind: str  # its `ming_py.kinds` entry
    source: str  # the ONNX node
    inputs: tuple[str, ...]  # channel names
    outputs: tuple[str, ...]
    window: Window | None = None
    # Weights in the process's own order: conv (C_out, C_in / groups, K), depthwise (C, K),
    # pointwise (C_out, C_in / groups), dense (N, K) with K in stream order.
    weights: np.ndarray | None = None
    epilogue: Epilogue | None = None
    # the parameters of its kind, an instance of its `ProcessKind.params_type` (a split's routes, a permute's
    # order, a bilinear resize's tables); None where the kind has none (or a split whose outputs carry all)
    params: KindParams | None = None


@dataclass(frozen=True)
class Port:
    """The accelerator's input or one of its outputs: an int8 (C, H, W) map in raster order.

    `array_shape` is the lifted tensor's own shape; the host reorders between it
    and the stream, and does the float quantization and the host tail.
    """

    channel: str
    array_shape: tuple[int, ...]
    onnx_name: str
    onnx_shape: tuple[int, ...]
    scale: float
    zero_point: int
    host_ops: tuple[HostOp, ...] = ()
    dtype: str = "float32"  # the model's own element type at this port: "float32", "int8" or "uint8"
    permutation: tuple[int, ...] = ()  # model array -> array_shape layout (see ir.GraphInput)
    quantizer: str = "onnxruntime"  # whose rounding quantizes a float input: "onnxruntime" or "tflite"
    index: int = 0  # an output's place among the model's outputs


@dataclass(eq=False)
class StreamGraph:
    """`outputs` are in the order of an image's output record: the accelerator sends all of output 0's
    words for an image, then output 1's, ... (`line_buffers.fifo.record_order`)."""

    name: str
    processes: list[Process]
    channels: dict[str, Channel]
    input: Port
    outputs: tuple[Port, ...]

    def process(self, name: str) -> Process:
        return next(p for p in self.processes if p.name == name)


# ---- schedule -------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessSchedule:
    unroll: tuple[tuple[str, int], ...] = ()  # (loop, factor); missing loops are not unrolled
    storage: tuple[tuple[str, str], ...] = ()  # (buffer, "bram" | "uram" | "lutram"); default BRAM
    multipliers: str = "dsp"  # where the int8 products are computed (ming_py.kinds.window.MULTIPLIERS)
    requantizers: int = 0  # requantizers serving the output lanes in turn; 0: one per lane
    bands: int = 1  # weights streamed from DDR: bands of rows its map is taken in (`ming_py.kinds.streamed`)

    def factor(self, loop: str) -> int:
        return dict(self.unroll).get(loop, 1)

    def storage_of(self, buffer: str) -> str:
        return dict(self.storage).get(buffer, "bram")


@dataclass(frozen=True)
class Schedule:
    """Parallelism of a design: per-process unroll factors, per-channel lanes and FIFO depths."""

    processes: dict[str, ProcessSchedule] = field(default_factory=dict)
    lanes: dict[str, int] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)

    def of(self, process: str) -> ProcessSchedule:
        return self.processes.get(process, ProcessSchedule())

    def lanes_of(self, channel: str) -> int:
        return self.lanes.get(channel, 1)

    def depth_of(self, channel: str) -> int:
        return self.depths.get(channel, 2)

    def fifo_of(self, channel: str) -> FifoStorage:
        """Where the channel's FIFO goes and what it takes (`array_layout.fifo_storage`): its BIND_STORAGE pragma in
        the C++, its `fifo_storage` in report.json and its share of the totals."""
        return fifo_storage(self.depth_of(channel), 8 * self.lanes_of(channel))


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
