"""Microseconds per image of the host tail of a deployed accelerator: unpacking its output words, dequantizing
and the host steps after it, timed as `run.py --benchmark` times "host: unpack and float tail".

    python benchmarks/host_tail.py            # numpy only; no build, no hardware

Each tail is `ming_driver.batch_outputs` (what the driver runs on every batch) on random output words, for
the output ports ming builds for:

* ONNX softmax: a 10-class QDQ Softmax, onnxruntime's QLinearSoftmax (`ming_host.ort_qlinear_softmax`), the
  float32 output dequantized and reshaped to (1, 10) (examples/tiny_cnn.onnx);
* TFLite softmax: a 10-class int8 SOFTMAX, TFLite's reference kernel (`ming_host.tflite_softmax`), int8 out
  (a ResNet-8);
* dequantize only: a 32x32x8 float32 map, dequantized and permuted back to the model's NHWC layout.

The time is the best of several repeats of each batch, divided by the images in it.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / folder) for folder in ("runtime", "contract")]
import ming_driver  # noqa: E402
import ming_ports  # noqa: E402
from ming_host import HostOp, words_per_image  # noqa: E402

BATCHES = (1, 16, 256)
REPEATS = 7
SECONDS_PER_REPEAT = 0.2


def port(onnx_shape, array_shape, stream_shape, host_ops=(), dtype="float32", permutation=()) -> ming_ports.Port:
    """An output port as the build's metadata describes it."""
    values = int(np.prod(stream_shape))
    return ming_ports.Port("y", tuple(onnx_shape), tuple(array_shape), tuple(stream_shape), 0.0303, 39, values,
                            words_per_image(values), dtype, tuple(permutation), tuple(host_ops))


TAILS = {
    "ONNX softmax, 10 classes": port((1, 10), (10,), (10, 1, 1), (
        HostOp("softmax", axis=0), HostOp("quantize", scale=1 / 255, zero_point=-128),
        HostOp("dequantize", scale=1 / 255, zero_point=-128), HostOp("reshape", shape=(1, 10)))),
    "TFLite softmax, 10 classes": port((1, 10), (1, 10), (10, 1, 1), (HostOp("tflite_softmax", scale=1.0),), "int8"),
    "dequantize only, 32x32x8 map": port((1, 32, 32, 8), (1, 8, 32, 32), (8, 32, 32), permutation=(0, 3, 1, 2)),
}


def microseconds_per_image(output: ming_ports.Port, images: int) -> float:
    """The best time of the host tail of `output` for a batch of `images`, per image."""
    words = np.random.default_rng(0).integers(0, 1 << 64, (images, output.words), dtype=np.uint64)
    number = max(1, int(SECONDS_PER_REPEAT / _seconds(lambda: ming_driver.batch_outputs(words, [output]))))
    best = min(timeit.repeat(lambda: ming_driver.batch_outputs(words, [output]), number=number, repeat=REPEATS))
    return 1e6 * best / number / images


def _seconds(work) -> float:
    work()  # warm up
    return max(timeit.timeit(work, number=1), 1e-6)


def main() -> None:
    header = f"{'host tail (us per image)':<32}" + "".join(f"{f'batch {b}':>12}" for b in BATCHES)
    print(header)
    print("-" * len(header))
    for name, output in TAILS.items():
        print(f"{name:<32}" + "".join(f"{microseconds_per_image(output, b):>12.1f}" for b in BATCHES))


if __name__ == "__main__":
    main()
