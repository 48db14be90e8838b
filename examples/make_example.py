"""Build the tiny example CNN used in the README.

Running this script writes, next to itself:

* ``tiny_cnn.onnx`` -- a small CNN (3 convs, 2 max-pools, Gemm, Softmax),
  int8 QDQ-quantized per-channel with onnxruntime's static quantizer;
* ``input.npy``     -- a seeded float32 input of shape (1, 3, 16, 16).

Everything is deterministic: running it again produces byte-identical files.
``build_tiny_cnn()`` (the float model) is also reused by the test-suite's model
zoo, so this file must stay importable without side effects.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUT_SHAPE = (1, 3, 16, 16)
OUTPUT_SHAPE = (1, 10)
OPSET = 17
IR_VERSION = 8
WEIGHT_SEED = 2024
CALIB_SEED = 1234
CALIB_SAMPLES = 8
INPUT_SEED = 7


def _conv_weights(rng, cout, cin, k):
    fan_in = cin * k * k
    w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)
    b = rng.standard_normal(cout) * 0.1
    return w.astype(np.float32), b.astype(np.float32)


def build_tiny_cnn() -> onnx.ModelProto:
    """Float tiny CNN: 1x3x16x16 -> 1x10 probabilities."""
    rng = np.random.default_rng(WEIGHT_SEED)
    inits = []
    nodes = []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    # conv1: 3 -> 8, 3x3 same, relu, maxpool 2x2 -> 8x8x8
    w, b = _conv_weights(rng, 8, 3, 3)
    nodes.append(helper.make_node("Conv", ["x", init("conv1.w", w), init("conv1.b", b)], ["conv1_out"],
                                  name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]))
    nodes.append(helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"))
    nodes.append(helper.make_node("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1",
                                  kernel_shape=[2, 2], strides=[2, 2]))
    # conv2: 8 -> 16, 3x3 stride 2 -> 16x4x4, relu
    w, b = _conv_weights(rng, 16, 8, 3)
    nodes.append(helper.make_node("Conv", ["pool1_out", init("conv2.w", w), init("conv2.b", b)], ["conv2_out"],
                                  name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))
    nodes.append(helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"))
    # conv3: 16 -> 16, 1x1, relu, maxpool 2x2 -> 16x2x2
    w, b = _conv_weights(rng, 16, 16, 1)
    nodes.append(helper.make_node("Conv", ["relu2_out", init("conv3.w", w), init("conv3.b", b)], ["conv3_out"],
                                  name="conv3", kernel_shape=[1, 1]))
    nodes.append(helper.make_node("Relu", ["conv3_out"], ["relu3_out"], name="relu3"))
    nodes.append(helper.make_node("MaxPool", ["relu3_out"], ["pool2_out"], name="pool2",
                                  kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("Flatten", ["pool2_out"], ["flat_out"], name="flatten", axis=1))
    # fc: 64 -> 10, softmax
    fc_w = (rng.standard_normal((10, 64)) * np.sqrt(1.0 / 64)).astype(np.float32)
    fc_b = (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes.append(helper.make_node("Gemm", ["flat_out", init("fc.w", fc_w), init("fc.b", fc_b)], ["fc_out"],
                                  name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["fc_out"], ["y"], name="softmax", axis=1))

    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(OUTPUT_SHAPE))],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ming-example")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize(float_model: onnx.ModelProto, out_path: pathlib.Path, input_shape, per_channel: bool = True):
    """int8 QDQ static quantization with a seeded calibration set."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class _Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(CALIB_SEED)
            self._data = iter([{"x": rng.standard_normal(input_shape).astype(np.float32)}
                               for _ in range(CALIB_SAMPLES)])

        def get_next(self):
            return next(self._data, None)

    with tempfile.TemporaryDirectory() as tmp:
        float_path = pathlib.Path(tmp) / "float.onnx"
        onnx.save(float_model, str(float_path))
        quantize_static(str(float_path), str(out_path), _Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        per_channel=per_channel)
    return out_path


def main(out_dir: pathlib.Path | None = None) -> None:
    out_dir = pathlib.Path(out_dir) if out_dir else pathlib.Path(__file__).resolve().parent
    model_path = quantize(build_tiny_cnn(), out_dir / "tiny_cnn.onnx", INPUT_SHAPE, per_channel=True)
    x = np.random.default_rng(INPUT_SEED).standard_normal(INPUT_SHAPE).astype(np.float32)
    np.save(out_dir / "input.npy", x)
    print(f"wrote {model_path} and {out_dir / 'input.npy'}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else None)
