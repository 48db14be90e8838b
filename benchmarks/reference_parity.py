"""Parity of `ming reference` with the models' own runtimes on the test models.

ONNX (the zoo, per-tensor and per-channel weights, and some of it rewritten as
tf2onnx writes int8 TFLite models): onnxruntime. TFLite (the
test networks of tests/tflite_models.py): TFLite's reference kernels (the
arithmetic ming follows, and TFLite Micro's) and LiteRT's default CPU path
(XNNPACK). Prints per model the largest difference in output LSBs and the
share of output values that are bit-exact, over `--inputs` random inputs.

    python benchmarks/reference_parity.py [--inputs 20] [--models lenet,resnet8] [--only onnx|tflite]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import converted_onnx  # noqa: E402
import tflite_models  # noqa: E402
import zoo  # noqa: E402

from ming_py import parity  # noqa: E402
from ming_py.errors import MingError  # noqa: E402
from ming_py.pipeline import lift  # noqa: E402
from ming_py.reference import run as reference_run  # noqa: E402

CONVERTED = ("tiny_cnn", "residual_block", "lenet", "mlp", "conv3x3_same", "dw_separable")
CONVERTED_NHWC_OUTPUT = ("conv3x3_same", "dw_separable")
TFLITE_MODELS = {
    "tflite_resnet8": tflite_models.resnet8, "tflite_ds_cnn": tflite_models.classifier,
    "tflite_mobilenet": tflite_models.mobilenet, "tflite_autoencoder": tflite_models.autoencoder,
    "tflite_conv_stack_per_tensor": lambda: tflite_models.conv_stack(per_channel=False),
    "tflite_pooled_window": lambda: tflite_models.pooled(global_pool=False),
    "tflite_float_io": tflite_models.float_io, "tflite_global_mean": tflite_models.global_mean,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--models", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--only", choices=("onnx", "tflite"), help="one frontend's models")
    args = parser.parse_args()
    chosen = {n for n in args.models.split(",") if n}
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "tflite":
            onnx_table([n for n in zoo.MODELS if not chosen or n in chosen], Path(tmp), args.inputs)
            converted_table([n for n in CONVERTED if not chosen or n in chosen], Path(tmp), args.inputs)
        if args.only != "onnx":
            tflite_table([n for n in TFLITE_MODELS if not chosen or n in chosen], Path(tmp), args.inputs)


def onnx_table(names: list[str], directory: Path, inputs: int) -> None:
    print(f"{'ONNX model':<26} {'weights':<12} {'max |diff| LSB':>14} {'% exact':>9}")
    for name in names:
        for per_channel in (False, True):
            path = zoo.quantized_model(name, directory, per_channel)
            granularity = "per-channel" if per_channel else "per-tensor"
            try:
                graph = lift(path)
            except MingError as exc:
                print(f"{name:<26} {granularity:<12} rejected: {exc}")
                continue
            result = parity.Parity(0, 0, 0)
            for seed in range(inputs):
                result = result.merge(parity.compare(graph, path, zoo.random_input(name, seed)))
            print(f"{name:<26} {granularity:<12} {result.max_lsb:>14} {result.exact_percent:>8.2f}%")


def converted_table(names: list[str], directory: Path, inputs: int) -> None:
    """The zoo's models rewritten as tf2onnx writes int8 TFLite models (tests/converted_onnx.py)."""
    print(f"\n{'converter-style ONNX model':<34} {'max |diff| LSB':>14} {'% exact':>9}")
    for name in names:
        source = zoo.quantized_model(name, directory, per_channel=True)
        path = converted_onnx.converter_style(source, directory / f"{name}_converted.onnx",
                                              nhwc_output=name in CONVERTED_NHWC_OUTPUT)
        graph = lift(path)
        result = parity.Parity(0, 0, 0)
        for seed in range(inputs):
            result = result.merge(parity.compare(graph, path, converted_onnx.model_input(path, seed)))
        print(f"{name:<34} {result.max_lsb:>14} {result.exact_percent:>8.2f}%")


def tflite_table(names: list[str], directory: Path, inputs: int) -> None:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    print(f"\n{'TFLite model':<30} {'vs reference kernels':>21} {'max LSB':>8} {'vs XNNPACK':>11} {'max LSB':>8}")
    for name in names:
        path = directory / f"{name}.tflite"
        path.write_bytes(TFLITE_MODELS[name]())
        graph = lift(path)
        runtimes = {}
        for kind in (OpResolverType.BUILTIN_REF, OpResolverType.AUTO):
            try:
                runtimes[kind] = Interpreter(model_path=str(path), experimental_op_resolver_type=kind)
                runtimes[kind].allocate_tensors()
            except RuntimeError:  # XNNPACK refuses some models (per-tensor convolution weights)
                runtimes.pop(kind)
        results = {kind: parity.Parity(0, 0, 0) for kind in runtimes}
        step = _output_step(graph.outputs[0])
        for seed in range(inputs):
            x = _tflite_input(graph, seed)
            ours = reference_run(graph, x)[graph.outputs[0].name]
            for kind, interpreter in runtimes.items():
                expected = _invoke(interpreter, x)
                diff = np.abs(ours.astype(np.float64) - expected.astype(np.float64)) / step
                results[kind] = results[kind].merge(parity.Parity(int(np.rint(diff.max())),
                                                                  int(np.count_nonzero(ours == expected)), diff.size))
        ref = results[OpResolverType.BUILTIN_REF]
        xnn = (f"{results[OpResolverType.AUTO].exact_percent:>10.2f}% {results[OpResolverType.AUTO].max_lsb:>8}"
               if OpResolverType.AUTO in runtimes else f"{'refused':>11} {'-':>8}")
        print(f"{name:<30} {ref.exact_percent:>20.2f}% {ref.max_lsb:>8} {xnn}")


def _output_step(out) -> float:
    """1 for int8 outputs; the quantization step of a dequantized (float) output."""
    if out.dtype == "int8":
        return 1.0
    dequantize = [op for op in out.host_ops if op.kind == "dequantize"]
    return dequantize[-1].scale if dequantize else out.scale


def _tflite_input(graph, seed: int) -> np.ndarray:
    port, rng = graph.inputs[0], np.random.default_rng(seed)
    if port.dtype == "float32":
        return (rng.standard_normal(port.onnx_shape) * 2).astype(np.float32)
    return rng.integers(-128, 128, port.onnx_shape).astype(np.int8)


def _invoke(interpreter, x: np.ndarray) -> np.ndarray:
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


if __name__ == "__main__":
    main()
