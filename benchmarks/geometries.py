"""Generated layer geometries on demand: draw N cases of tests/geometries.py's strategy with a seed, build each
(ONNX QDQ/QOperator int8/uint8 through onnxruntime's quantizer, or a TFLite flatbuffer), schedule it, C-simulate
it and compare it bit for bit with `ming reference` and the framework (onnxruntime; LiteRT's BUILTIN_REF),
then print a table of what it found: equal, refused (a MingError naming what ming does not take), differs
(which comparison, which input, how many values) or crashed (any other failure: an exception, a failed or
deadlocked C-simulation, a counter leaving its declared width).

    python benchmarks/geometries.py --seed 7 -n 40
    python benchmarks/geometries.py --seed 7 -n 20 --family depthwise --frontend tflite
    python benchmarks/geometries.py --ci                # the cases tests/test_generated_geometries.py runs
    python benchmarks/geometries.py --regressions       # the committed regression corpus (and crashes)
    python benchmarks/geometries.py --seed 7 -n 40 --only 12 --keep   # one case again, its files kept

Exit code 1 when any case differs or crashed, 0 otherwise. `--json FILE` writes every case and outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import geometries  # noqa: E402


def _cases(args) -> list[tuple[str, geometries.Case]]:
    """(label, case) pairs to run."""
    if args.regressions:
        import test_generated_geometries as t
        import test_geometry_crashes as crashes

        return [(name, case) for name, case in t.REGRESSIONS.items()] + \
            [(name, case) for name, case in crashes.SUPPORTED.items()] + \
            [(name, case) for name, (case, _) in crashes.REFUSED.items()]
    if args.ci:
        import test_generated_geometries as t

        return [(f"ci{i}", case) for i, case in enumerate(t.ci_cases())]
    families = args.family.split(",") if args.family else [None]
    frontends = args.frontend.split(",") if args.frontend else [None]
    for name in families:
        if name is not None and name not in geometries.FAMILIES:
            sys.exit(f"--family {name}: one of {', '.join(geometries.FAMILIES)}")
    for name in frontends:
        if name is not None and name not in geometries.FRONTENDS:
            sys.exit(f"--frontend {name}: one of {', '.join(geometries.FRONTENDS)}")
    pairs = [(f, fe) for f in families for fe in frontends]
    cases: list[geometries.Case] = []
    per_pair = -(-args.count // len(pairs))
    for index, (family, frontend) in enumerate(pairs):
        cases += geometries.draw_cases(args.seed + index, per_pair, frontend=frontend, family=family,
                                       schedule=args.schedule, max_values=args.max_values)
    return [(str(i), case) for i, case in enumerate(cases[:args.count])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-n", "--count", type=int, default=20)
    parser.add_argument("--family", help=f"comma-separated focus layers: {', '.join(geometries.FAMILIES)}")
    parser.add_argument("--frontend", help=f"comma-separated: {', '.join(geometries.FRONTENDS)}")
    parser.add_argument("--schedule", choices=geometries.SCHEDULES, help="every case under this schedule")
    parser.add_argument("--max-values", type=int, default=geometries.MAX_VALUES, help="values in a map, at most")
    parser.add_argument("--only", help="comma-separated labels of the cases to run (as the table shows them)")
    parser.add_argument("--ci", action="store_true", help="the CI cases of tests/test_generated_geometries.py")
    parser.add_argument("--regressions", action="store_true", help="the committed regression corpus")
    parser.add_argument("--list", action="store_true", help="print the cases without running them")
    parser.add_argument("--keep", action="store_true", help="keep each case's model and build (in --workdir)")
    parser.add_argument("--workdir", type=Path, help="where the cases are built (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="write every case and its outcome here")
    args = parser.parse_args()

    cases = _cases(args)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [(label, case) for label, case in cases if label in wanted]
    if args.list:
        for label, case in cases:
            print(f"{label:>5}  {case.family:<15} {case.describe()}\n       {case!r}")
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ming-geometries-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MING_CACHE_DIR", str(workdir / "csim_cache"))
    rows, records = [], []
    counts: dict[str, int] = {}
    start = time.monotonic()
    print(f"{'case':>5}  {'family':<15} {'frontend':<16} {'s':>5}  outcome / geometry")
    for label, case in cases:
        outcome = geometries.check_case(case, workdir / f"case{label}", keep=args.keep)
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
        frontend = case.frontend + ("" if case.frontend == "tflite" else (" pc" if case.per_channel else " pt"))
        print(f"{label:>5}  {case.family:<15} {frontend:<16} {outcome.seconds:5.1f}  {outcome}\n"
              f"{'':>5}  {case.describe()}", flush=True)
        if outcome.status in ("differs", "crashed"):
            print(f"{'':>5}  {case!r}", flush=True)
        rows.append((label, case, outcome))
        records.append({"label": label, "family": case.family, "frontend": case.frontend,
                        "case": repr(case), "geometry": case.describe(), "status": outcome.status,
                        "stage": outcome.stage, "detail": outcome.detail, "seconds": round(outcome.seconds, 2),
                        "stage_seconds": {k: round(v, 2) for k, v in outcome.stages.items()},
                        "differences": [vars(d) for d in outcome.differences]})
    elapsed = time.monotonic() - start
    print(f"\n{len(rows)} cases in {elapsed:.0f} s: " +
          ", ".join(f"{counts.get(s, 0)} {s}" for s in ("equal", "refused", "differs", "crashed")))
    found = [(label, case, outcome) for label, case, outcome in rows if outcome.status in ("differs", "crashed")]
    if found:
        print("\nfound:")
        for label, case, outcome in found:
            print(f"  {label}: {case.describe()}\n      {outcome}")
    if args.json:
        args.json.write_text(json.dumps({"cases": records, "seconds": round(elapsed, 1)}, indent=1) + "\n")
    if not args.keep and args.workdir is None:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
