"""Writes small int8 .tflite models whose inputs and outputs are uint8, int8 or float32, as the TFLite converter
writes them for `inference_input_type` / `inference_output_type`, into OUT_DIR (tests/data/tflite_interfaces).

For a uint8 input the converter writes a QUANTIZE uint8 -> int8 (same scale, zero point - 128) right after it; for
a float input a QUANTIZE float -> int8; for a uint8 output a QUANTIZE int8 -> uint8 right before it (after the
SOFTMAX where the model ends in one); for a float output a DEQUANTIZE. The models (Keras 3, random seeded weights
and BatchNorm statistics, full-integer quantization with a representative dataset of 32 seeded random inputs,
`TFLITE_BUILTINS_INT8` only), each a few KB:

- cnn_<in>_<out>.tflite, the 9 combinations of uint8, int8 and float32 for input and output, per-channel
  quantization: a 16x16x3 CNN (Conv + BatchNorm + ReLU, MaxPooling2D, DepthwiseConv2D, 1x1 Conv, GAP, Dense:
  four logits).
- cnn_softmax_per_tensor_<in>_<out>.tflite: the same CNN ending in Softmax, per-tensor quantization
  (`_experimental_disable_per_channel`), in three combinations (the uint8 output is QUANTIZE after SOFTMAX).
- reshape_input_uint8_float.tflite: a 256-value vector input reshaped into a 16x16x1 map (Keras Reshape:
  QUANTIZE, RESHAPE), then convolved; uint8 in, float32 out.
- permute_input_<in>_<out>.tflite: a channels-first 3x16x16 input (as PyTorch users have it) moved to 16x16x3
  by Keras Permute (TRANSPOSE), then convolved; uint8 in and out, and float32 in, int8 out.
- reshape_output_int8_uint8.tflite / permute_output_float_float.tflite: the output of the last conv reshaped into
  (64, 4) (a detector's boxes) and transposed to channels first.
- two_outputs_mixed.tflite: a two-head model whose outputs have different types: the converter writes one type
  for every output, so this file is its float-output conversion with the second output's DEQUANTIZE replaced by
  the QUANTIZE int8 -> uint8 (zero point + 128) its uint8-output conversion writes there (the one edit made here).

Needs tensorflow-cpu (2.21, Keras 3):

    /work/tfenv/bin/python tests/generators/tflite_interfaces.py tests/data/tflite_interfaces [NAME ...]

Seeds are fixed and the Keras session cleared between models, so the files are byte-identical from run to run
with the same package versions (tensorflow-cpu 2.21.0, Keras 3.15.1).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")

import flatbuffers  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402

SEED = 5
TYPES = {"uint8": tf.uint8, "int8": tf.int8, "float": None}


def _conv_bn(x, filters, kernel, strides=1, depthwise=False):
    if depthwise:
        x = layers.DepthwiseConv2D(kernel, strides=strides, padding="same", use_bias=False)(x)
    else:
        x = layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False)(x)
    return layers.Activation("relu")(layers.BatchNormalization()(x))


def _features(x):
    x = _conv_bn(x, 8, 3)
    x = layers.MaxPooling2D(2)(x)  # 8x8
    x = _conv_bn(x, None, 3, depthwise=True)
    return _conv_bn(x, 8, 1)


def cnn(softmax: bool = False) -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    x = layers.Dense(4)(layers.GlobalAveragePooling2D()(_features(inputs)))
    return keras.Model(inputs, layers.Softmax()(x) if softmax else x)


def reshape_input() -> keras.Model:
    inputs = keras.Input((256,))
    x = layers.Reshape((16, 16, 1))(inputs)
    return keras.Model(inputs, layers.Conv2D(4, 1)(_features(x)))


def permute_input() -> keras.Model:
    inputs = keras.Input((3, 16, 16))
    x = layers.Permute((2, 3, 1))(inputs)
    return keras.Model(inputs, layers.Conv2D(4, 1)(_features(x)))


def reshape_output() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    return keras.Model(inputs, layers.Reshape((64, 4))(layers.Conv2D(4, 1)(_features(inputs))))


def permute_output() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    return keras.Model(inputs, layers.Permute((3, 1, 2))(layers.Conv2D(4, 1)(_features(inputs))))


def two_outputs() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    x = _features(inputs)
    classes = layers.Softmax()(layers.Dense(4)(layers.GlobalAveragePooling2D()(x)))
    return keras.Model(inputs, [layers.Conv2D(6, 1)(x), classes])


# name -> (builder, input type, output type, per-channel)
MODELS = {f"cnn_{i}_{o}": (cnn, i, o, True) for i in TYPES for o in TYPES}
MODELS |= {f"cnn_softmax_per_tensor_{i}_{o}": (lambda: cnn(softmax=True), i, o, False)
           for i, o in (("uint8", "uint8"), ("float", "uint8"), ("uint8", "float"))}
MODELS |= {
    "reshape_input_uint8_float": (reshape_input, "uint8", "float", True),
    "permute_input_uint8_uint8": (permute_input, "uint8", "uint8", True),
    "permute_input_float_int8": (permute_input, "float", "int8", True),
    "reshape_output_int8_uint8": (reshape_output, "int8", "uint8", True),
    "permute_output_float_float": (permute_output, "float", "float", True),
}
MIXED = {"two_outputs_mixed": two_outputs}


def _randomize_statistics(model: keras.Model, rng: np.random.Generator) -> None:
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, gamma.shape), rng.normal(0, 0.2, beta.shape),
                               rng.normal(0, 0.2, mean.shape), rng.uniform(0.5, 2.0, variance.shape)])
        elif getattr(layer, "use_bias", False) and len(layer.get_weights()) == 2:
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel, rng.normal(0, 0.2, bias.shape)])


def to_tflite(model: keras.Model, input_type: str, output_type: str, per_channel: bool) -> bytes:
    rng = np.random.default_rng(SEED)
    shape = (1,) + tuple(model.input_shape[1:])
    samples = [rng.normal(0, 1, shape).astype(np.float32) for _ in range(32)]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([s] for s in samples)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter._experimental_disable_per_channel = not per_channel
    if TYPES[input_type] is not None:
        converter.inference_input_type = TYPES[input_type]
    if TYPES[output_type] is not None:
        converter.inference_output_type = TYPES[output_type]
    return converter.convert()


def _built(builder) -> keras.Model:
    keras.utils.set_random_seed(SEED)
    model = builder()
    _randomize_statistics(model, np.random.default_rng(SEED))
    return model


def mixed_outputs(builder) -> bytes:
    """The float-output conversion with its second output's DEQUANTIZE made the uint8 conversion's QUANTIZE."""
    model = _built(builder)
    as_float = schema.ModelT.InitFromPackedBuf(bytearray(to_tflite(model, "int8", "float", True)), 0)
    as_uint8 = schema.ModelT.InitFromPackedBuf(bytearray(to_tflite(model, "int8", "uint8", True)), 0)
    graph, uint8_graph = as_float.subgraphs[0], as_uint8.subgraphs[0]
    output = graph.outputs[1]
    dequantize = next(op for op in graph.operators if output in op.outputs)
    uint8_output = uint8_graph.tensors[uint8_graph.outputs[1]]
    quantize = next(op for op in uint8_graph.operators if uint8_graph.outputs[1] in op.outputs)
    as_float.operatorCodes.append(as_uint8.operatorCodes[quantize.opcodeIndex])
    dequantize.opcodeIndex = len(as_float.operatorCodes) - 1
    dequantize.builtinOptionsType = schema.BuiltinOptions.QuantizeOptions
    dequantize.builtinOptions = schema.QuantizeOptionsT()
    tensor = graph.tensors[output]
    tensor.type = schema.TensorType.UINT8
    tensor.quantization = uint8_output.quantization
    builder = flatbuffers.Builder(1024)
    builder.Finish(as_float.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def main(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    for name in names or list(MODELS) + list(MIXED):
        if name in MIXED:
            data = mixed_outputs(MIXED[name])
        else:
            builder, input_type, output_type, per_channel = MODELS[name]
            data = to_tflite(_built(builder), input_type, output_type, per_channel)
        (out / f"{name}.tflite").write_bytes(data)
        print(f"{name}: {len(data)} bytes")
        keras.backend.clear_session()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [NAME ...]  (names: {', '.join(list(MODELS) + list(MIXED))})")
    main(Path(sys.argv[1]), sys.argv[2:])
