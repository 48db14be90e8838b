"""LiteRT's kernels on every int8 value, as a program: `tflite_tables` runs it in a child process (`isolated`),
since LiteRT's interpreter is native code reading operators and constants copied from an untrusted model.

    python -m ming_py.frontends.litert_probe < REQUEST.json > RESULTS.json

The request is {"probes": [{"model": base64 one-op flatbuffer, "shape": [256, ...], "resolvers": [...]}]}; the
program checks its form before running anything. For each probe it writes `probe <i>` to stderr (so that a
crash names the probe it happened in), runs the model on an int8 input of that shape holding every int8 value
along the first axis and answers, in order, {"values": base64 int8 output} or {"error": LiteRT's first line}.
A resolver after the first is tried only where the one before it lacks the op. The parent checks the answer
in turn (`tflite_tables`): nothing here is trusted.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys

import numpy as np

MAX_TABLE_CHANNELS = 4096  # tables of one node: a 256 x 4096 probe, 1 MiB of table ROM
MAX_PROBE_RANK = 8
RESOLVERS = ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")
MISSING_OP = "Didn't find op"


def main() -> int:
    try:
        probes = parse_request(sys.stdin.buffer.read())
    except ValueError as error:
        sys.stderr.write(f"error: malformed request: {error}\n")
        return 2
    answers = []
    for index, (model, shape, resolvers) in enumerate(probes):
        sys.stderr.write(f"probe {index}\n")
        sys.stderr.flush()
        answers.append(run_probe(model, shape, resolvers))
    sys.stdout.write(json.dumps(answers))
    return 0


def parse_request(data: bytes) -> list[tuple[bytes, tuple[int, ...], tuple[str, ...]]]:
    """The probes of a request, each (flatbuffer, shape, resolvers); ValueError for anything out of form."""
    request = json.loads(data)
    if not isinstance(request, dict) or not isinstance(request.get("probes"), list):
        raise ValueError("no list of probes")
    return [_probe(entry) for entry in request["probes"]]


def _probe(entry) -> tuple[bytes, tuple[int, ...], tuple[str, ...]]:
    if not isinstance(entry, dict) or set(entry) != {"model", "shape", "resolvers"}:
        raise ValueError("a probe is not {model, shape, resolvers}")
    shape, resolvers = entry["shape"], entry["resolvers"]
    if not isinstance(shape, list) or not 1 <= len(shape) <= MAX_PROBE_RANK or shape[0] != 256 or \
            not all(type(d) is int and d >= 1 for d in shape) or math.prod(shape) > 256 * MAX_TABLE_CHANNELS:
        raise ValueError(f"probe shape {shape!r}")
    if not isinstance(resolvers, list) or not resolvers or not all(r in RESOLVERS for r in resolvers):
        raise ValueError(f"resolvers {resolvers!r}")
    if not isinstance(entry["model"], str):
        raise ValueError("model is not base64 text")
    try:
        model = base64.b64decode(entry["model"], validate=True)
    except binascii.Error:
        raise ValueError("model is not base64 text") from None
    return model, tuple(shape), tuple(resolvers)


def run_probe(model: bytes, shape: tuple[int, ...], resolvers: tuple[str, ...]) -> dict[str, str]:
    values = np.broadcast_to(np.arange(-128, 128, dtype=np.int8).reshape((256,) + (1,) * (len(shape) - 1)), shape)
    for position, resolver in enumerate(resolvers):
        try:
            output = _invoke(model, np.ascontiguousarray(values), resolver)
        except (RuntimeError, ValueError) as error:  # LiteRT refuses the op or its parameters in its Prepare
            text = str(error).strip()
            if MISSING_OP in text and position + 1 < len(resolvers):
                continue
            return {"error": text.splitlines()[0] if text else type(error).__name__}
        if output.dtype != np.int8 or output.size != math.prod(shape):
            return {"error": f"an output of {output.dtype} {list(output.shape)} for an int8 input {list(shape)}"}
        return {"values": base64.b64encode(output.tobytes()).decode()}
    return {"error": "no resolver"}


def _invoke(model: bytes, values: np.ndarray, resolver: str) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_content=model, experimental_op_resolver_type=getattr(OpResolverType, resolver))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], values)
    interpreter.invoke()
    return np.asarray(interpreter.get_tensor(interpreter.get_output_details()[0]["index"]))


if __name__ == "__main__":
    sys.exit(main())
