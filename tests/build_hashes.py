"""The sha256 of every file `ming build` writes for every test network: a refactoring's byte-identity check.

    python tests/build_hashes.py --record   # writes tests/build_hashes.json
    python tests/build_hashes.py --check    # rebuilds and names every file whose bytes changed
    python tests/build_hashes.py --check --only zoo/   # the networks whose names contain "zoo/"

Networks: every zoo model (int8 QDQ), every architecture in the four quantizer formats, the hand-made
TFLite models and the bundled example, on the KV260 (and the example on an Alveo card, and with weights streamed
from DDR on both). The models come
from onnxruntime's quantizer and numpy's generators (and LiteRT computes the TFLite tables), so the hashes hold for the package versions recorded
in the file, and for the quantizer's options on this CPU (`zoo.QUANTIZE_OPTIONS`: 7-bit weights on x86 without VNNI);
`--check` refuses to compare under other versions or options.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import architectures  # noqa: E402
import tflite_models  # noqa: E402
import zoo  # noqa: E402

from ming_py import steps  # noqa: E402
from ming_py.build import BuildOptions, design_of  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402

RECORD = HERE / "build_hashes.json"
PACKAGES = ("onnx", "onnxruntime", "numpy", "iree-base-compiler", "tosa-converter-for-tflite", "pulp", "ai-edge-litert")
TFLITE = ("tiny_conv", "every_op", "conv_stack", "residual", "pooled", "float_io", "classifier", "mobilenet",
          "resnet8", "autoencoder", "global_mean", "inception")


def networks(directory: Path):
    """(name, model path, board) of every test network, models written to `directory`."""
    yield "example", zoo._REPO / "examples" / "tiny_cnn.onnx", "kv260"
    yield "example@u55c", zoo._REPO / "examples" / "tiny_cnn.onnx", "u55c"
    yield "example+ddr", zoo._REPO / "examples" / "tiny_cnn.onnx", "kv260"
    yield "example+ddr@u55c", zoo._REPO / "examples" / "tiny_cnn.onnx", "u55c"
    for name in sorted(zoo.MODELS):
        yield f"zoo/{name}", zoo.quantized_model(name, directory), "kv260"
    for name in sorted(architectures.ARCHITECTURES):
        for fmt in sorted(architectures.FORMATS):
            if (name, fmt) not in architectures.LEFT_IN_FLOAT:
                yield f"architecture/{name}/{fmt}", architectures.quantized(name, fmt, directory), "kv260"
    for name in TFLITE:
        path = directory / f"{name}.tflite"
        path.write_bytes(getattr(tflite_models, name)())
        yield f"tflite/{name}", path, "kv260"


# The example's pointwise and dense processes with their weights streamed from DDR ("+ddr" networks).
DDR_SETTINGS = {"conv3.weights": "ddr", "fc.weights": "ddr"}


def file_hashes(model: Path, board: str, settings: dict | None = None) -> dict[str, str]:
    explored = steps.explore(steps.stream(lift(model)), BuildOptions(board=board, settings=settings or {}))
    files = design_of(explored.streamed, explored.board, solution=explored.solution, simulated=explored.simulated).files
    return {name: hashlib.sha256(content if isinstance(content, bytes) else content.encode()).hexdigest()
            for name, content in sorted(files.items())}


def all_hashes(only: str = "") -> dict[str, dict[str, str]]:
    hashes = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, model, board in networks(Path(directory)):
            if only not in name:
                continue
            try:
                hashes[name] = file_hashes(model, board, DDR_SETTINGS if "+ddr" in name else None)
            except MingError as exc:  # a refusal is part of the behaviour too
                hashes[name] = {"refused": str(exc)}
            print(f"{name}: {len(hashes[name])} files", file=sys.stderr, flush=True)
    return hashes


def differences(recorded: dict, now: dict) -> list[str]:
    lines = []
    for name in sorted(set(recorded) | set(now)):
        before, after = recorded.get(name), now.get(name)
        if before is None or after is None:
            lines.append(f"{name}: {'new' if before is None else 'gone'}")
            continue
        lines += [f"{name}: {file} differs" for file in sorted(set(before) | set(after))
                  if before.get(file) != after.get(file)]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true")
    mode.add_argument("--check", action="store_true")
    parser.add_argument("--only", default="", help="check only the networks whose names contain this")
    args = parser.parse_args(argv)
    versions = {package: version(package) for package in PACKAGES} | {"quantize_options": zoo.QUANTIZE_OPTIONS}
    if args.record:
        if args.only:
            parser.error("--record records every network")
        RECORD.write_text(json.dumps({"versions": versions, "networks": all_hashes()}, indent=1, sort_keys=True) + "\n")
        return 0
    recorded = json.loads(RECORD.read_text())
    if recorded["versions"] != versions:
        print(f"recorded with {recorded['versions']}, this is {versions}: record again on the base commit",
              file=sys.stderr)
        return 2
    now = all_hashes(args.only)
    changed = differences({name: files for name, files in recorded["networks"].items() if name in now}, now)
    print("\n".join(changed) or "every file of every network is byte-identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
