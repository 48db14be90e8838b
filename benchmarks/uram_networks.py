"""ImageNet-size networks that fit the KV260 only with weights in URAM (tests/uram_networks.py: MobileNetV2-0.35,
SqueezeNet 1.1 and an EfficientNet-lite-style net at 128 x 128, random weights, int8 QDQ from onnxruntime's
quantizer): each built for the KV260 as `ming build` builds it (the ILP chooses every weight array's memory,
the build verifies its C++ against `ming reference`), then C-simulated on random images, the weights loaded
through the weight port, and compared with onnxruntime bit for bit.

    python benchmarks/uram_networks.py [--only squeezenet] [--images 2] [--objective latency] [--out DIR] [--json FILE]

Prints per network: the smallest design's BRAM18K with ROM weights, the build's DSP / BRAM18K / URAM / LUT,
the weights in URAM, LUTRAM and BRAM (bits), the estimated and simulated latency, the load time at start,
and the verdicts: the C-simulation against onnxruntime with every QDQ Conv as its int8 kernel (the exactness
check), and against onnxruntime's default session, which runs some Convs in float32 (docs/numerics.md, 4.1).
Exit code 1 when a network does not build or differs. docs/uram_networks.json holds a run (`--objective latency
--images 1`, about 20 to 30 minutes per network on a busy two-core machine) made against the default session only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import uram_networks  # noqa: E402

from ming_py.build import build  # noqa: E402
from ming_py.csim import run_csim  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.ilp.candidates import smallest_design  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.options import BuildOptions  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402
from ming_py.progress import Progress  # noqa: E402
from ming_py.ort_session import onnxruntime_session  # noqa: E402


def onnxruntime_outputs(path: Path, x: np.ndarray, integer_kernels: bool = True) -> dict[str, np.ndarray]:
    """onnxruntime's outputs; with `integer_kernels`, every QDQ Conv as its int8 QLinearConv
    (`session.qdqisint8allowed`): the default x86 session runs in float32 a Conv next to a tensor that
    several nodes read, which no integer datapath reproduces (docs/numerics.md, 4.1)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if integer_kernels:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    session = onnxruntime_session(str(path), options)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: x})))


def weight_bits_by_memory(report: dict) -> dict[str, int]:
    bits: dict[str, int] = {}
    for node in report["nodes"]:
        for buffer in node["buffers"]:
            if buffer["role"] == "weights":
                size = buffer["element_bits"] * int(np.prod(buffer["shape"]))
                bits[buffer["memory"]] = bits.get(buffer["memory"], 0) + size
    return bits


def measure(name: str, directory: Path, images: int, quiet: bool, objective: str = "frugal") -> dict:
    model = uram_networks.quantized(name, directory)
    rom_bram = smallest_design(build_stream_graph(lift(model)))["bram18k"]
    out = directory / f"{name}_out"
    started = time.monotonic()
    build(model, out, BuildOptions(board="kv260", objective=objective), progress=Progress(quiet=quiet))
    seconds = time.monotonic() - started
    report = json.loads((out / "report.json").read_text())
    totals = report["totals"]
    differing = default_differing = compared = 0
    for seed in range(images):
        x = np.random.default_rng(seed).standard_normal((1, 3, 128, 128)).astype(np.float32)
        ours = run_csim(out, x, concurrent=True)
        for output, y in onnxruntime_outputs(model, x).items():
            differing += int(np.count_nonzero(np.asarray(ours[output]) != y))
            compared += y.size
        for output, y in onnxruntime_outputs(model, x, integer_kernels=False).items():
            default_differing += int(np.count_nonzero(np.asarray(ours[output]) != y))
    load = totals.get("weights_load", {})
    return {"network": uram_networks.NETWORKS[name].what, "processes": totals["processes"],
            "rom_smallest_bram18k": rom_bram, "dsp": totals["dsp"], "bram18k": totals["bram18k"],
            "uram": totals["uram"], "lut": totals["lut"], "cycles": totals["estimated_cycles"],
            "latency_us": totals["estimated_latency_us"], "simulated_cycles": totals["cycles"],
            "throughput_cycles": totals["throughput_cycles"], "weight_bits": weight_bits_by_memory(report),
            "load_cycles": load.get("load_cycles", 0), "load_us": load.get("load_us", 0.0),
            "verified": report["verification"]["equal"], "csim_values": compared, "csim_differ": differing,
            "csim_differ_default_session": default_differing,
            "objective": objective, "build_seconds": round(seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the networks whose names contain this text")
    parser.add_argument("--images", type=int, default=2, help="random images C-simulated against onnxruntime")
    parser.add_argument("--out", help="keep the models and builds here (default: a temporary directory)")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--objective", default="frugal", help="the ILP's objective (ming build --objective)")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args()
    rows, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.out or tmp)
        directory.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("MING_CACHE_DIR", str(Path(tmp) / "cache"))
        for name in uram_networks.NETWORKS:
            if args.only not in name:
                continue
            try:
                row = measure(name, directory, args.images, args.quiet, args.objective)
            except MingError as error:
                print(f"{name}: {error}")
                failed += 1
                continue
            rows.append(row)
            failed += not row["verified"] or row["csim_differ"] > 0
            print(json.dumps(row))
    print(f"{'network':<38} {'ROM BRAM':>8} {'DSP':>5} {'BRAM18K':>7} {'URAM':>4} {'LUT':>8} {'latency':>11} "
          f"{'load':>9}  csim == onnxruntime")
    for r in rows:
        print(f"{r['network']:<38} {r['rom_smallest_bram18k']:>8} {r['dsp']:>5} {r['bram18k']:>7} {r['uram']:>4} "
              f"{r['lut']:>8,} {r['latency_us']:>8.1f} us {r['load_us']:>6.1f} us  "
              f"{r['csim_values'] - r['csim_differ']} of {r['csim_values']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
