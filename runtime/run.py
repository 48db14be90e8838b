#!/usr/bin/env python3
"""Run the accelerator of this build on images: quantize, stream through the hardware, the model's outputs out.

    python3 run.py --input x.npy --output y.npy [--batch N] [--benchmark] [--backend pynq|xrt|csim]

x.npy (numpy.save) holds one image in the model's input shape, or N images stacked on a first axis: float32
(finite; a model whose input is int8 or uint8 quantizes them with its input's scale and zero point as TFLite's
QUANTIZE does), or the model's own int8/uint8 values for such a model, as `ming reference` takes it (other
types, empty arrays and files that are not .npy are refused; README.md states this build's input and output).
y.npy gets the model's output in the same form,
equal to `ming reference` (and onnxruntime) for the same input. A model with several outputs takes
--output once per output, in the model's order, or one .npz path (keys: the output names). Outputs are
written to a temporary file beside each path and renamed into place; an --output that is a symbolic link
is refused.
--batch sets the images per DMA transfer (default: all, up to the DMA's transfer limit). --benchmark
repeats the run and prints images/s and microseconds per image, the accelerator's transfer time apart from
the host's packing. --backend csim runs the build's C-simulation instead of the hardware (numpy and g++
only), with the same packing, batching and framing.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ming_driver  # noqa: E402
import ming_npy  # noqa: E402
import ming_ports  # noqa: E402
from ming_errors import DeployError  # noqa: E402

BENCHMARK_SECONDS = 2.0


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True,
                        help="input .npy, one image or N stacked: float32, or the model's own int8/uint8 values")
    parser.add_argument("--output", action="append", default=[],
                        help="output .npy (float32, or int8/uint8 as the model gives it), once per model output "
                             "in its order (or one .npz for all)")
    parser.add_argument("--batch", type=int, help="images per transfer (default: all)")
    parser.add_argument("--benchmark", action="store_true", help="print throughput and per-image times")
    parser.add_argument("--backend", choices=ming_driver.BACKENDS,
                        help="pynq (Zynq boards), xrt (Alveo) or csim (C-simulation); default: the board's")
    return parser.parse_args(argv)


def benchmark(accelerator: ming_driver.Accelerator, x: np.ndarray, batch: int | None) -> str:
    """Runs `x` again and again for about BENCHMARK_SECONDS; the table of where the time went."""
    accelerator.timing = ming_driver.Timing()
    start = time.perf_counter()
    while time.perf_counter() - start < BENCHMARK_SECONDS or accelerator.timing.images == 0:
        accelerator.run(x, batch)
    t = accelerator.timing
    per_image = lambda seconds: 1e6 * seconds / t.images  # noqa: E731
    total = t.pack + t.accelerator + t.unpack
    rows = [("accelerator (transfer to completion)", t.accelerator), ("host: quantize and pack", t.pack),
            ("host: unpack and float tail", t.unpack), ("end to end", total)]
    lines = [f"{t.images} images on the {accelerator.backend_name} backend, "
             f"{accelerator.images_per_transfer(len(accelerator.images(x)), batch)} per transfer"]
    lines += [f"  {name:<38} {t.images / seconds:>12,.1f} images/s {per_image(seconds):>12,.1f} us/image"
              for name, seconds in rows]
    return "\n".join(lines)


class Terminated(BaseException):
    """SIGTERM, raised so that every `finally` runs: the compiler's process group is killed and the staging
    binary and temporary files are removed (ming_cxx.compile_program)."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    args = parse(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        here = Path(__file__).resolve().parent
        meta = ming_driver.read_metadata(here)  # every field checked before anything runs
        if args.output:
            ming_npy.check_output_paths(args.output, ming_ports.output_names(meta))
        if args.batch is not None and args.batch < 1:
            raise DeployError(f"--batch {args.batch}: give a positive number of images per transfer")
        port = ming_ports.Port.of(meta["input"])
        x = ming_npy.load_input(args.input, port)
        ming_ports.input_images(x, port)  # before any compile or transfer
        accelerator = ming_driver.Accelerator(here, args.backend)
        outputs = accelerator.run(x, args.batch)
        if args.output:
            ming_npy.save_outputs(args.output, outputs)
        if args.benchmark:
            print(benchmark(accelerator, x, args.batch))
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Terminated:
        print("error: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
