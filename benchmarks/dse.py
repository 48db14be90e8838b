"""Design-space exploration: every benchmark network at several DSP shares of one board (as MING's Table IV).

For the MLPerf-Tiny-shaped networks of benchmarks/networks.py (resnet8_32,
ds_cnn_49x10, mobilenet_v1_025_96, autoencoder_640), the test zoo's networks and a single
Conv+ReLU (3->16 channels, 3x3) at 32x32 and 224x224, each built with
`ming build` at every DSP share (the default frugal objective), then with `--target-fps` at 1/2, 1/4 and
1/10 of the highest throughput of those designs (rows fps/2, fps/4, fps/10: the least-resource design that
sustains it within the whole budget), prints one table row:

* ``est cycles`` -- the cost model's latency (``totals["estimated_cycles"]``);
* ``bound`` -- a lower bound on the latency of the built design:

      max(ceil(MACs / MAC DSPs), max padded positions, ceil(input values / 8), ceil(output values / 8))

  - ``MACs``: the model's multiply-accumulates (``totals["macs"]``);
  - ``MAC DSPs`` ("DSPs used for MACs"): the sum, over the processes of kind
    conv, pointwise, depthwise and dense, of the product of their unroll
    factors (report.json ``nodes[].schedule.unroll``), i.e. the MACs the
    design issues per cycle;
  - ``max padded positions``: the most input positions any window process
    steps through, one per cycle: padded_height * padded_width of its
    report.json ``window`` (in_height * in_width for 1x1 kernels);
  - ``input values / 8``, ``output values / 8``: the accelerator's input and output, int8 values
    over a 64-bit AXI4-Stream port, 8 a cycle (the output port limits maps as large as their input);
* ``est/bound`` -- their ratio;
* ``interval`` -- cycles between images when images follow each other (the slowest process's loop,
  iterations + depth: report.json ``nodes[].cycles``), and ``int/bound`` its ratio to the bound, which
  bounds the interval too: the single-image latency adds every layer's fill to it, the interval does not;
* ``sim cycles`` -- `ming simulate`'s latency (report.json ``totals["cycles"]``, the build's headline); "deadlock"
  when it deadlocks;
* ``est-sim %`` -- (estimate - simulated) / simulated, in percent;
* DSP, BRAM18K, URAM, LUT of the design (the calibrated cost model, ilp/cost.py);
* ``shared LUT`` / ``shared DSP`` -- what the design's shared requantizers save against one requantizer per
  output lane: per process with R shared requantizers for L lanes, (L - R) requantization lanes (their
  calibrated datapath, ming_py.epilogues.lane_cost, times the HLS factor) less the latch selects;
* the ILP's solve time and the time of the whole `ming build` (import, ILP, FIFO sizing, simulation, emission,
  writing).

Below the table, one line per process of every design (unless --no-processes): its kind, unroll
factors, where its multipliers are (dsp, fabric, dsp_pair), its requantization datapath, DSP and LUT.

A share where no design fits prints "no design fits"; any other build failure prints its error.

    python benchmarks/dse.py [--shares 100%,20%,5%] [--board kv260] [--networks resnet8_32,lenet]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import networks  # noqa: E402
import zoo  # noqa: E402

from ming_py.build import BuildOptions, build  # noqa: E402
from ming_py.epilogues import lane_cost  # noqa: E402
from ming_py.ilp.cost import HLS_LUT_OVERHEAD, LATCH_SELECT_LUT  # noqa: E402
from ming_py.ilp.objectives import TargetMissed  # noqa: E402
from ming_py.ilp.solve import NoDesignFits  # noqa: E402
from ming_py.options import target_board  # noqa: E402
from ming_py.kinds import MAC_KINDS  # noqa: E402

BENCHMARKS = ["resnet8_32", "ds_cnn_49x10", "mobilenet_v1_025_96", "autoencoder_640"]
ZOO_NETWORKS = ["residual_block", "two_residual_stages", "dw_separable", "lenet", "tiny_cnn"]
SINGLE_CONVS = {f"conv3x3_3to16_{s}x{s}": s for s in (32, 224)}
DEFAULT = BENCHMARKS + ZOO_NETWORKS + list(SINGLE_CONVS)
# the other networks of benchmarks/networks.py run only when asked for with --networks
EXTRA = [n for n in networks.NETWORKS if n not in BENCHMARKS]
PORT_VALUES_PER_CYCLE = 8
TARGET_FRACTIONS = (2, 4, 10)  # the fps/N rows: the least-resource design at 1/N of the highest throughput

BOUND_TEXT = """\
bound = max(ceil(MACs / MAC DSPs), max padded positions, ceil(input values / 8), ceil(output values / 8)), where
  MAC DSPs      = sum over conv/pointwise/depthwise/dense processes of the product of their unroll factors
                  (report.json nodes[].schedule.unroll): the MACs issued per cycle;
  max padded positions = the largest padded_height * padded_width of any window process's report.json window
                  (in_height * in_width for 1x1 kernels): one input position a cycle;
  input values / 8, output values / 8 = the accelerator's int8 input and output, 8 a cycle per port.
interval = the slowest process's loop cycles (report.json nodes[].cycles): cycles between images back to back,
  which the bound bounds too (the single-image latency adds every layer's fill).
est-sim % = (estimated - simulated) / simulated * 100."""


def single_conv(size: int, directory: Path) -> Path:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.27).astype(np.float32), "w")
    bias = numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name="relu")], f"conv_relu_{size}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, size, size])], [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return zoo.quantize_float_model(model, directory / f"conv_relu_{size}.onnx", (1, 3, size, size))


def model_path(name: str, directory: Path) -> Path:
    if name in SINGLE_CONVS:
        return single_conv(SINGLE_CONVS[name], directory)
    if name in networks.NETWORKS:
        return networks.quantized(name, directory)
    return zoo.quantized_model(name, directory)


def input_values(path: Path) -> int:
    dims = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    return math.prod(d.dim_value for d in dims)


def output_values(report: dict) -> int:
    """Values the accelerator's output port carries (every channel no process consumes)."""
    return sum(math.prod(c["shape"]) for c in report["channels"] if c["consumer"] == "output")


def padded_positions(window: dict) -> int:
    if list(window["kernel"]) == [1, 1]:
        return window["in_height"] * window["in_width"]
    top, left, bottom, right = window["pads"]
    return (window["in_height"] + top + bottom) * (window["in_width"] + left + right)


def lower_bound(report: dict, values: int) -> tuple[int, dict[str, int]]:
    """The bound and its terms."""
    nodes = report["nodes"]
    mac_dsps = sum(math.prod(n["schedule"]["unroll"].values()) for n in nodes if n["kind"] in MAC_KINDS)
    terms = {"macs": math.ceil(report["totals"]["macs"] / max(mac_dsps, 1)),
             "positions": max([padded_positions(n["window"]) for n in nodes if n.get("window")], default=0),
             "input": math.ceil(values / PORT_VALUES_PER_CYCLE),
             "output": math.ceil(output_values(report) / PORT_VALUES_PER_CYCLE)}
    return max(terms.values()), terms | {"mac_dsps": mac_dsps}


def process_lines(report: dict) -> list[str]:
    """One line per process: kind, unroll factors, multipliers, requantization datapath and requantizers, DSP
    and LUT."""
    lines = []
    for n in report["nodes"]:
        schedule = n["schedule"]
        unroll = " ".join(f"{loop}={f}" for loop, f in schedule.get("unroll", {}).items() if f > 1) or "-"
        shared = f" x{schedule['requantizers']}" if schedule.get("requantizers") else ""
        lines.append(f"  {n['name']:<24} {n['kind']:<14} {unroll:<20} {schedule.get('multipliers') or '-':<9} "
                     f"{(n.get('requantization') or '-') + shared:<26} {n.get('dsp', 0):>5} {n.get('lut', 0):>7,}")
    return lines


def shared_savings(report: dict) -> tuple[int, int]:
    """(LUT, DSP) the shared requantizers save against one requantizer per output lane."""
    lut = dsp = 0
    for n in report["nodes"]:
        shared = n["schedule"].get("requantizers")
        if shared:
            lanes = n["schedule"]["lanes_out"][0]
            lane_lut, lane_dsp = lane_cost(n["requantization"], n["schedule"].get("multipliers", "dsp"))
            lut += HLS_LUT_OVERHEAD * ((lanes - shared) * lane_lut - LATCH_SELECT_LUT * 32 * lanes)
            dsp += (lanes - shared) * lane_dsp
    return round(lut), dsp


def row(name: str, label: str, path: Path, out: Path, options: BuildOptions) -> tuple[str, list[str], int | None]:
    """The table row of one design, its per-process lines and its interval (None when no design was built)."""
    head = f"{name:<22} {label:>7}"
    began = time.perf_counter()
    try:
        result = build(path, out, options)
    except (NoDesignFits, TargetMissed) as missed:
        return f"{head}  {missed} ({time.perf_counter() - began:.1f} s)", [], None
    except Exception as error:  # any other failure is reported, and the table goes on
        return f"{head}  build failed ({time.perf_counter() - began:.1f} s): {type(error).__name__}: {error}", [], None
    seconds = time.perf_counter() - began
    report = json.loads(result.files["report.json"])
    t = report["totals"]
    simulated, estimated = t["cycles"], t["estimated_cycles"]
    bound, _ = lower_bound(report, input_values(path))
    if t.get("simulated_deadlock") is None:
        sim_text, diff_text = f"{simulated:>11,}", f"{100 * (estimated - simulated) / max(simulated, 1):>+9.1f}"
    else:
        sim_text, diff_text = f"{'deadlock':>11}", f"{'-':>9}"
    interval = max(n.get("cycles", 0) for n in report["nodes"])
    saved_lut, saved_dsp = shared_savings(report)
    return (f"{head} {estimated:>11,} {bound:>9,} {estimated / max(bound, 1):>9.2f} "
            f"{interval:>9,} {interval / max(bound, 1):>9.2f} {sim_text} {diff_text} "
            f"{t['dsp']:>5} {t['bram18k']:>7} {t['uram']:>4} {t['lut']:>7,} {saved_lut:>10,} {saved_dsp:>10,} "
            f"{result.solution.solve_seconds:>6.2f} {seconds:>7.2f}"), process_lines(report), interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shares", default="100%,20%,5%", help="DSP shares, comma-separated (default 100%%,20%%,5%%)")
    parser.add_argument("--board", default="kv260")
    parser.add_argument("--networks", default=",".join(DEFAULT),
                        help=f"comma-separated subset of {', '.join(DEFAULT)} (the default, in that order); "
                             f"also {', '.join(EXTRA)}")
    parser.add_argument("--no-processes", action="store_true", help="leave out the per-process lines")
    args = parser.parse_args()
    names = [n for n in args.networks.split(",") if n]
    unknown = [n for n in names if n not in DEFAULT + EXTRA]
    if unknown:
        parser.error(f"unknown network(s) {', '.join(unknown)}; choose from {', '.join(DEFAULT + EXTRA)}")
    header = (f"{'model':<22} {'design':>7} {'est cycles':>11} {'bound':>9} {'est/bound':>9} {'interval':>9} "
              f"{'int/bound':>9} {'sim cycles':>11} "
              f"{'est-sim %':>9} {'DSP':>5} {'BRAM18K':>7} {'URAM':>4} {'LUT':>7} {'shared LUT':>10} "
              f"{'shared DSP':>10} {'ILP s':>6} {'build s':>7}")
    print(f"board {args.board}; design: a share of the board's DSPs the ILP may use (ming build --dsp SHARE, "
          f"frugal objective), or fps/N: the least-resource design within the whole budget at 1/N of the "
          f"highest throughput of those shares (ming build --target-fps)")
    print(header)
    print("-" * len(header))
    began = time.perf_counter()
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in names:
            path = model_path(name, tmp)
            intervals = []
            designs = [(share, BuildOptions(board=args.board, limits={"dsp": share}))
                       for share in args.shares.split(",")]
            for label, options in designs:
                line, processes, interval = row(name, label, path, tmp / "out", options)
                print(line, flush=True)
                intervals += [interval] if interval is not None else []
                if processes:
                    details += [f"{name} at {label}:"] + processes
            if not intervals:
                continue
            clock = target_board(designs[0][1]).clock_mhz
            for fraction in TARGET_FRACTIONS:
                label = f"fps/{fraction}"
                options = BuildOptions(board=args.board, target_fps=clock * 1e6 / min(intervals) / fraction)
                line, processes, _ = row(name, label, path, tmp / "out", options)
                print(line, flush=True)
                if processes:
                    details += [f"{name} at {label}:"] + processes
    print("-" * len(header))
    print(BOUND_TEXT)
    if not args.no_processes:
        print(f"\nper process: {'name':<24} {'kind':<14} {'unroll':<20} {'multiply':<9} {'requantization':<26} "
              f"{'DSP':>5} {'LUT':>7}")
        print("\n".join(details))
    print(f"total {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
