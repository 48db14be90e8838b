"""Which architectures ming compiles, in which quantization format, and how well.

For every architecture of tests/architectures.py in every format onnxruntime's quantizer writes (QDQ int8,
QDQ uint8, QOperator): whether `ming build --board kv260` succeeds, the share of output values of the
C-simulated accelerator equal to onnxruntime's over `--inputs` random inputs, the latency (the build's
headline: the cycle-level simulation's) and the resources. `--write` records the results in docs/coverage.json and regenerates docs/supported.md's
coverage table from them (tests/test_coverage_table.py checks that the two agree).

    python benchmarks/coverage.py [--inputs 4] [--architectures mobilenet_v2,...] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import architectures  # noqa: E402

from ming_py.build import BuildOptions, build  # noqa: E402
from ming_py.csim import run_csim  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.ort_session import onnxruntime_session  # noqa: E402

COVERAGE_JSON = REPO / "docs" / "coverage.json"
TABLE_PAGE = REPO / "docs" / "supported.md"
BEGIN, END = "<!-- coverage table: begin -->", "<!-- coverage table: end -->"


def measure(name: str, fmt: str, directory: Path, inputs: int) -> dict:
    """One row: build status, the share of csim output values equal to onnxruntime's, latency, resources."""
    model = architectures.quantized(name, fmt, directory)
    out = directory / f"{name}_{fmt}"
    try:
        build(model, out, BuildOptions(board="kv260"))
    except MingError as exc:
        return {"architecture": name, "format": fmt, "build": "refused", "reason": str(exc)}
    session = onnxruntime_session(str(model))
    shape = architectures.ARCHITECTURES[name].input_shape
    equal = total = 0
    for seed in range(inputs):
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        expected = session.run(None, {session.get_inputs()[0].name: x})
        for mine, theirs in zip(run_csim(out, x).values(), expected):
            equal += int(np.count_nonzero(np.asarray(mine).reshape(theirs.shape) == theirs))
            total += theirs.size
    totals = json.loads((out / "report.json").read_text())["totals"]
    return {"architecture": name, "format": fmt, "build": "ok", "equal": equal, "values": total,
            "latency_us": round(totals["latency_us"], 1), "cycles": totals["cycles"],
            "dsp": totals["dsp"], "bram18k": totals["bram18k"], "uram": totals["uram"], "lut": totals["lut"]}


def table(rows: list[dict]) -> str:
    """The coverage table as Markdown (docs/supported.md's and this script's output)."""
    lines = ["| architecture | exercises | format | build | csim == onnxruntime | KV260 latency | DSP | BRAM18K | LUT |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        what = architectures.ARCHITECTURES[row["architecture"]].what
        if row["build"] != "ok":
            reason = row["reason"].split(";")[0]  # what is refused, without the advice
            lines.append(f"| {row['architecture']} | {what} | {row['format']} | refused: {reason} | | | | | |")
            continue
        share = row["equal"] / row["values"]
        lines.append(f"| {row['architecture']} | {what} | {row['format']} | ok | {share:.2%} "
                     f"({row['values'] - row['equal']} of {row['values']} differ) | {row['latency_us']:,} µs "
                     f"| {row['dsp']} | {row['bram18k']} | {row['lut']:,} |")
    return "\n".join(lines)


def page_with(text: str, rows: list[dict]) -> str:
    """docs/supported.md's text with the table between its markers replaced by `rows`' table."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table(rows)}\n{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=4)
    parser.add_argument("--architectures", default="", help="comma-separated names (default: all)")
    parser.add_argument("--write", action="store_true", help="update docs/coverage.json and docs/supported.md")
    args = parser.parse_args()
    chosen = [n for n in args.architectures.split(",") if n] or list(architectures.ARCHITECTURES)
    if args.write and chosen != list(architectures.ARCHITECTURES):
        parser.error("--write records every architecture; leave out --architectures")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            for fmt in architectures.FORMATS:
                rows.append(measure(name, fmt, Path(tmp), args.inputs))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    if args.write:
        COVERAGE_JSON.write_text(json.dumps(rows, indent=1) + "\n")
        TABLE_PAGE.write_text(page_with(TABLE_PAGE.read_text(), rows))


if __name__ == "__main__":
    main()
