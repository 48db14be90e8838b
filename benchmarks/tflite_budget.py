"""TFLite models against their ONNX exports under a DSP budget: the latency, DSPs and LUTs of the design `ming build`
makes from each converter-made pair in tests/data/converted/ (resnet, ds_cnn, mobilenet, autoencoder), with TFLite's
requantization as written (4 DSP48E2 per lane) and by the narrow datapath proved equal to it (1 DSP48E2,
`numerics.narrow_constants`; switched by `BuildOptions.narrow_requant`).

    python benchmarks/tflite_budget.py                       # kv260, --dsp 5% and 20%
    python benchmarks/tflite_budget.py --shares 5% --models resnet,mobilenet

Each build runs in its own process (the caches stay apart); a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONVERTED = ROOT / "tests" / "data" / "converted"


def pairs() -> list[str]:
    """Model names with both a .tflite and an .onnx file."""
    return sorted(p.stem for p in CONVERTED.glob("*.tflite") if (CONVERTED / f"{p.stem}.onnx").exists())


def measure(model: Path, share: str, board: str, narrow: bool) -> dict:
    """latency_us, dsp, lut of one build (run in this process), or its error."""
    from ming_py.build import BuildOptions, build
    from ming_py.errors import MingError

    options = BuildOptions(board=board, limits={"dsp": share}, narrow_requant=narrow)
    with tempfile.TemporaryDirectory() as out:
        try:
            result = build(model, Path(out) / "design", options)
        except MingError as error:  # a row per refused build, the table goes on
            return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:90]}"}
    totals = json.loads(result.files["report.json"])["totals"]
    datapaths = sorted({n.get("requantization") for n in json.loads(result.files["report.json"])["nodes"]}
                       - {None})
    return {"latency_us": totals["latency_us"], "dsp": totals["dsp"], "lut": totals["lut"], "datapaths": datapaths}


def measured(model: Path, share: str, board: str, narrow: bool) -> dict:
    command = [sys.executable, __file__, "--one", str(model), share, board, "1" if narrow else "0"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:90] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(result: dict) -> str:
    if "error" in result:
        return f"{'failed':>28}"
    return f"{result['latency_us']:>10,.1f} {result['dsp']:>6} {result['lut']:>10,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shares", default="5%,20%", help="DSP shares, comma-separated (default 5%%,20%%)")
    parser.add_argument("--board", default="kv260")
    parser.add_argument("--models", default=",".join(pairs()), help=f"subset of {', '.join(pairs())}")
    parser.add_argument("--one", nargs=4, metavar=("MODEL", "SHARE", "BOARD", "NARROW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model, share, board, narrow = args.one
        print(json.dumps(measure(Path(model), share, board, narrow == "1")))
        return
    columns = f"{'latency us':>10} {'DSP':>6} {'LUT':>10}"
    print(f"board {args.board}; each cell: {columns.strip()}")
    print(f"{'model':<12} {'DSP share':>9} | {'ONNX':^28} | {'TFLite, rule as written':^28} | "
          f"{'TFLite, narrow':^28} | {'TFLite/ONNX before':>18} {'after':>6}")
    errors, notes = [], []
    for name in args.models.split(","):
        for share in args.shares.split(","):
            onnx = measured(CONVERTED / f"{name}.onnx", share, args.board, True)
            before = measured(CONVERTED / f"{name}.tflite", share, args.board, False)
            after = measured(CONVERTED / f"{name}.tflite", share, args.board, True)
            ratios = [f"{r['latency_us'] / onnx['latency_us']:.2f}" if "error" not in r and "error" not in onnx
                      else "-" for r in (before, after)]
            print(f"{name:<12} {share:>9} | {cell(onnx)} | {cell(before)} | {cell(after)} | {ratios[0]:>18} "
                  f"{ratios[1]:>6}", flush=True)
            errors += [f"{name} {kind} at {share}: {r['error']}" for kind, r in
                       (("onnx", onnx), ("tflite", before), ("tflite narrow", after)) if "error" in r]
            if "error" not in after:
                notes.append(f"{name} at {share}: narrow build's datapaths {', '.join(after['datapaths'])}")
    for line in errors + notes:
        print(line)


if __name__ == "__main__":
    main()
