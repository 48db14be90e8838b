"""The full-size ImageNet-class networks on the KV260 at its default clock: what ming builds of each, against the
latency goal and three lower bounds on it.

The networks are those of tests/generators/imagenet_models.py at their default sizes (random weights, int8 QDQ
from onnxruntime's quantizer): MobileNetV1 0.5 at 160, MobileNetV2 1.0 at 224, ResNet-18 at 224 and the
tiny-YOLOv3-shaped detector at half width at 320. Each is built as `ming build --board kv260` builds it (the build
verifies its C++ against `ming reference`), in a child process of its own with a time limit.

    python benchmarks/imagenet_kv260.py [--only NAME] [--out DIR] [--timeout SECONDS] [--json FILE]

One row per network: its MACs, the bytes of its int8 weights and of its int32 biases (the quantized inputs of
its Conv, Gemm and MatMul nodes, `imagenet_models.parameter_bytes`); the build's outcome (verified, the one-line
reason no design fits, or the one-line error of a build that failed), its simulated latency in cycles and ms,
DSP / BRAM18K / URAM / LUT and the build's seconds; the goal; and three lower bounds on the latency of any
design on the board, in ms:

* compute: MACs / the MAC lanes the whole usable board holds (`mac_lanes_within` of 100 % of every resource
  `Board.usable` leaves, beyond the default shares a build's budget takes) / clock;
* DDR: the weight bytes beyond what the chip can hold, read once per image at the rate of the ports the
  weights get (`ming_py.weights_ddr.weight_ports`, the rate the ILP budgets); 0 when every weight fits. The chip holds the usable BRAM18K x 18 Kib + URAM x 288 Kib,
  an optimistic figure (as if every bit held a weight, none an activation or a FIFO); biases are not counted;
* input: the image's int8 bytes through the accelerator's input stream (`STREAM_BITS` a cycle) / clock;

and which of the three is the largest ("limit"). Exit code 1 when a build fails (C++ that differs from
`ming reference`, a deadlock, an unsupported operator, any error but the two below) or runs out of time; a
network no design fits (`NoDesignFits`, `FifosOverBudget`) is a result, not a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "generators"))

import imagenet_models  # noqa: E402

from ming_py.emit.vivado import STREAM_BITS  # noqa: E402
from ming_py.boards import Board, load_board  # noqa: E402
from ming_py.ilp.budget import RESOURCES, Budget  # noqa: E402
from ming_py.ilp.cost import mac_lanes_within  # noqa: E402
from ming_py.weights_ddr import weight_ports  # noqa: E402

BOARD = "kv260"
BRAM18K_BYTES = 18 * 1024 // 8
URAM_BYTES = 288 * 1024 // 8


@dataclass(frozen=True)
class Network:
    name: str
    network: str  # an imagenet_models.NETWORKS name
    width: float
    resolution: int
    goal_ms: float

    def model(self, folder: Path) -> Path:
        path = folder / f"{self.name}.onnx"
        if not path.exists():
            imagenet_models.quantize(imagenet_models.float_model(self.network, self.width, self.resolution), path)
        return path


# The goals are the product's latency targets for the KV260 at its default clock, set against AMD's Vitis AI DPU
# on the same board (DPUCZDX8G B4096 at 300 MHz; Vitis AI model zoo tables: MobileNetV2 3.93 ms, ResNet-18
# 5.27 ms, MobileNetV1 3.15 ms, each at 224).
NETWORKS = [
    Network("mobilenet_v1_0.5_160", "mobilenet_v1", 0.5, 160, 0.5),
    Network("mobilenet_v2_1.0_224", "mobilenet_v2", 1.0, 224, 1.0),
    Network("resnet18_224", "resnet18", 1.0, 224, 4.0),
    Network("tiny_yolo_0.5_320", "tiny_yolo", 0.5, 320, 2.0),
]


def child_build(model: Path, out: Path) -> dict:
    """Build `model` for the board (the build raises VerificationFailed where its C++ differs from `ming
    reference`): the report's figures; or the error's one line, marked refused where no design fits."""
    from ming_py.build import build
    from ming_py.errors import MingError
    from ming_py.ilp.explore import FifosOverBudget
    from ming_py.ilp.solve import NoDesignFits
    from ming_py.options import BuildOptions

    try:
        build(model, out, BuildOptions(board=BOARD))
    except (NoDesignFits, FifosOverBudget) as refusal:
        return {"outcome": one_line(refusal), "refused": True}
    except MingError as error:
        return {"outcome": f"{type(error).__name__}: {one_line(error)}"}
    totals = json.loads((out / "report.json").read_text())["totals"]
    ddr = totals.get("weights_ddr", {}).get("bytes_per_image", 0)
    return {"outcome": "verified", "cycles": totals["cycles"], **{r: totals[r] for r in RESOURCES}, "ddr_bytes": ddr}


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def run_build(model: Path, out: Path, timeout: float) -> dict:
    """`child_build` in a process of its own (its own session, so that a timeout ends its children too)."""
    began = time.monotonic()
    process = subprocess.Popen([sys.executable, __file__, "--child", str(model), str(out)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        lines = stdout.strip().splitlines()
        row = json.loads(lines[-1]) if process.returncode == 0 and lines else \
            {"outcome": f"the build process ended with code {process.returncode}: "
                        f"{' '.join(stderr.strip().splitlines()[-1:])}"}
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        row = {"outcome": f"no result within {timeout:g} s"}
    return row | {"build_s": round(time.monotonic() - began, 1)}


def bounds_ms(macs: int, weight_bytes: int, input_bytes: int) -> dict[str, float]:
    """The three lower bounds on one image's latency on the whole usable board, in ms."""
    board = load_board(BOARD)
    hz = board.clock_mhz * 1e6
    whole_board = Budget.of(board, dict.fromkeys(RESOURCES, "100%"))
    beyond_chip = max(0, weight_bytes - on_chip_bytes(board))
    return {"compute": macs / mac_lanes_within(whole_board) / hz * 1e3,
            "ddr": beyond_chip / (weight_ports(board).bytes_per_cycle * hz) * 1e3,
            "input": input_bytes / (STREAM_BITS / 8) / hz * 1e3}


def on_chip_bytes(board: Board) -> int:
    """The bytes the board's usable block RAM and UltraRAM hold: optimistic, as if every bit held a weight."""
    return board.usable("bram18k") * BRAM18K_BYTES + board.usable("uram") * URAM_BYTES


def model_figures(path: Path) -> dict:
    model = onnx.load(str(path))
    weights, biases = imagenet_models.parameter_bytes(model)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"macs": imagenet_models.multiply_accumulates(model), "weight_bytes": weights, "bias_bytes": biases,
            "input_bytes": int(np.prod(shape))}  # int8 on the input stream, one byte a value


def measure(network: Network, folder: Path, timeout: float) -> dict:
    model = network.model(folder)
    figures = model_figures(model)
    bounds = bounds_ms(figures["macs"], figures["weight_bytes"], figures["input_bytes"])
    row = {"network": network.name, **figures, "goal_ms": network.goal_ms,
           "bounds_ms": {k: round(v, 4) for k, v in bounds.items()}, "limit": max(bounds, key=bounds.get)}
    built = run_build(model, folder / f"{network.name}_out", timeout)
    if "cycles" in built:
        built["ms"] = round(built["cycles"] / load_board(BOARD).clock_mhz / 1e3, 4)
    return row | built


HEADER = (f"{'network':<21} {'MMACs':>6} {'weights B':>10} {'biases B':>8} {'cycles':>9} {'ms':>7} {'DSP':>5} "
          f"{'BRAM18K':>7} {'URAM':>4} {'LUT':>7} {'DDR B/img':>10} {'goal ms':>7} {'compute':>7} {'DDR ms':>7} {'input':>7} "
          f"{'limit':<7} {'build s':>7}  outcome")


def line(row: dict) -> str:
    built = "cycles" in row
    figure = (lambda key, spec: format(row[key], spec)) if built else (lambda key, spec: "")
    bounds = row["bounds_ms"]
    return (f"{row['network']:<21} {row['macs'] / 1e6:>6.0f} {row['weight_bytes']:>10,} {row['bias_bytes']:>8,} "
            f"{figure('cycles', ','):>9} {figure('ms', '.3f'):>7} {figure('dsp', ''):>5} {figure('bram18k', ''):>7} "
            f"{figure('uram', ''):>4} {figure('lut', ','):>7} {figure('ddr_bytes', ','):>10} {row['goal_ms']:>7g} {bounds['compute']:>7.3f} "
            f"{bounds['ddr']:>7.3f} {bounds['input']:>7.3f} {row['limit']:<7} {row['build_s']:>7.0f}  {row['outcome']}")


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child_build(Path(sys.argv[2]), Path(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", metavar="NAME", help="only the networks whose name holds NAME")
    parser.add_argument("--out", type=Path, help="keep the models and builds here (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a build may take (default 1800)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the rows to FILE")
    args = parser.parse_args()
    networks = [n for n in NETWORKS if args.only is None or args.only in n.name]
    rows = []
    print(HEADER)
    print("-" * len(HEADER))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for network in networks:
            rows.append(measure(network, folder, args.timeout))
            print(line(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["outcome"] == "verified" or r.get("refused") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
