"""Every test network built as `ming build` builds it, with its self-check (ming_py/verify.py): a table of each
network's processes, the check's time (g++ compile and the two C-simulated images) and its verdict.

    python benchmarks/verify_networks.py [--only zoo/]      # the networks whose names contain the text

The networks are tests/build_hashes.py's (zoo, architectures in every quantizer format, hand-made TFLite, the
example) and the published models of tests/data/published. Exit code 1 when any design fails its check.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from build_hashes import networks  # noqa: E402

from ming_py.build import BuildOptions, design  # noqa: E402
from ming_py.ilp.explore import explore  # noqa: E402
from ming_py.line_buffers import build_stream_graph  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402
from ming_py.progress import Progress  # noqa: E402
from ming_py.verify import verify_design  # noqa: E402

PUBLISHED = HERE.parent / "tests" / "data" / "published"


def all_networks(directory: Path):
    yield from networks(directory)
    for path in sorted(PUBLISHED.glob("*.tflite")):
        yield f"published/{path.stem}", path, "kv260"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the networks whose names contain this text")
    args = parser.parse_args()
    failed = 0
    print(f"{'network':<48} {'processes':>9} {'check s':>8}  verdict")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("MING_CACHE_DIR", str(Path(tmp) / "cache"))
        for name, model, board in all_networks(Path(tmp)):
            if args.only not in name:
                continue
            try:
                graph = lift(model)
                chosen, solution, _ = explore(build_stream_graph(graph), BuildOptions(board=board))
                result = design(graph, chosen, solution=solution)
            except MingError as refused:
                print(f"{name:<48} {'-':>9} {'-':>8}  refused: {refused}")
                continue
            start = time.monotonic()
            verification = verify_design(result, Progress(quiet=True))
            seconds = time.monotonic() - start
            verdict = "equal" if verification.equal else verification.failure()
            failed += not verification.equal
            print(f"{name:<48} {len(result.stream_graph.processes):>9} {seconds:>8.1f}  {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
