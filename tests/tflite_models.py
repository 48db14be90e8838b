"""Small int8 TFLite models for the tests, written with the flatbuffers builder.

`TfliteBuilder` writes a model the way TFLite's post-training quantizer does:
int8 activations with per-tensor asymmetric scales, int8 symmetric weights
(per output channel for convolutions, per tensor where asked), int32 biases in
input*weight scale, fused activations as the output's clamp. Each layer runs
once in float on a calibration batch (`calibration` images) to choose its
output range, so activations are realistic rather than saturated.

The networks at the bottom are shaped like MLPerf Tiny's: ResNet-8, DS-CNN,
MobileNetV1 and the dense autoencoder, at small sizes.
"""

from __future__ import annotations

import numpy as np
from ai_edge_litert import schema_py_generated as schema

INT8, INT32, FLOAT32 = schema.TensorType.INT8, schema.TensorType.INT32, schema.TensorType.FLOAT32
ACTIVATIONS = {None: schema.ActivationFunctionType.NONE, "relu": schema.ActivationFunctionType.RELU,
               "relu6": schema.ActivationFunctionType.RELU6}
OP_VERSIONS = {  # the versions TFLite's converter writes for int8 kernels
    "CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "ADD": 2, "AVERAGE_POOL_2D": 2,
    "MAX_POOL_2D": 2, "RESHAPE": 1, "SOFTMAX": 2, "MEAN": 2, "CONCATENATION": 2, "PAD": 2,
    "QUANTIZE": 2, "DEQUANTIZE": 2,
}
OP_VERSIONS.update({"LOGISTIC": 2, "TANH": 2, "HARD_SWISH": 1, "LEAKY_RELU": 2, "ELU": 1, "PRELU": 1, "RELU": 2,
                    "RELU6": 2, "RELU_N1_TO_1": 1, "MUL": 2, "TRANSPOSE_CONV": 3})
OP_VERSIONS.update({"RESIZE_NEAREST_NEIGHBOR": 3, "RESIZE_BILINEAR": 3})
OP_VERSIONS.update({"SHAPE": 1, "STRIDED_SLICE": 1, "PACK": 1, "GATHER": 1, "EXPAND_DIMS": 1, "SQUEEZE": 1, "TILE": 3})
OP_VERSIONS.update({"MAXIMUM": 2, "MINIMUM": 2, "SPLIT": 2, "SPLIT_V": 2, "DEPTH_TO_SPACE": 1})
# float functions of the element-wise activations (for the calibration batch)
ELEMENTWISE = {
    "LOGISTIC": lambda x: 1 / (1 + np.exp(-x)), "TANH": np.tanh,
    "HARD_SWISH": lambda x: x * np.clip(x + 3, 0, 6) / 6, "ELU": lambda x: np.where(x > 0, x, np.expm1(x)),
    "RELU": lambda x: np.maximum(x, 0), "RELU6": lambda x: np.clip(x, 0, 6),
    "RELU_N1_TO_1": lambda x: np.clip(x, -1, 1),
}
FIXED_OUTPUT = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}  # TFLite's int8 kernels require these


class Tensor:
    def __init__(self, index: int, calibration: np.ndarray):
        self.index = index
        self.calibration = calibration  # the float values this tensor holds on the calibration batch

    @property
    def shape(self) -> tuple[int, ...]:
        return (1,) + self.calibration.shape[1:]


class TfliteBuilder:
    def __init__(self, seed: int = 0, calibration: int = 8):
        self.rng = np.random.default_rng(seed)
        self.calibration = calibration
        self.tensors: list = []
        self.buffers = [schema.BufferT()]
        self.operators: list = []
        self.op_codes: list[str] = []
        self.inputs: list[int] = []
        self.quant: dict[int, tuple[float, int]] = {}

    # ---- tensors ----

    def _tensor(self, name, shape, dtype, scale=None, zero_point=None, data=None, axis=0, signature=None) -> int:
        tensor = schema.TensorT()
        tensor.name = name
        tensor.shape = list(shape)
        tensor.shapeSignature = list(signature) if signature is not None else None
        tensor.type = dtype
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(scale)]
            q.zeroPoint = [int(z) for z in np.atleast_1d(zero_point)]
            q.quantizedDimension = axis
            tensor.quantization = q
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            self.buffers.append(buffer)
            tensor.buffer = len(self.buffers) - 1
        else:
            self.buffers.append(schema.BufferT())
            tensor.buffer = len(self.buffers) - 1
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def _activation(self, name, calibration, fused=None) -> Tensor:
        """An int8 activation tensor whose range covers `calibration` (after the fused clamp)."""
        if fused == "relu":
            calibration = np.maximum(calibration, 0)
        elif fused == "relu6":
            calibration = np.clip(calibration, 0, 6)
        low, high = min(float(calibration.min()), 0.0), max(float(calibration.max()), 0.0)
        scale = np.float32(max(high - low, 1e-3) / 255)
        zero_point = int(np.clip(np.round(-128 - low / scale), -128, 127))
        index = self._tensor(name, (1,) + calibration.shape[1:], INT8, scale, zero_point)
        self.quant[index] = (float(scale), zero_point)
        return Tensor(index, self._fake_quantize(calibration, scale, zero_point))

    @staticmethod
    def _fake_quantize(values, scale, zero_point):
        q = np.clip(np.round(values / scale) + zero_point, -128, 127)
        return ((q - zero_point) * scale).astype(np.float32)

    def _same_quant(self, name, source: Tensor, calibration) -> Tensor:
        scale, zero_point = self.quant[source.index]
        index = self._tensor(name, (1,) + calibration.shape[1:], INT8, scale, zero_point)
        self.quant[index] = (scale, zero_point)
        return Tensor(index, calibration)

    def _weights(self, name, shape, axis, per_channel=True):
        fan_in = int(np.prod(shape)) // shape[axis] if axis == 0 else int(np.prod(shape[1:3]))
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), shape).astype(np.float32)  # He: activations stay O(1)
        reduce = tuple(a for a in range(len(shape)) if a != axis)
        peak = np.abs(w).max(axis=reduce) if per_channel else np.full(shape[axis], np.abs(w).max())
        scale = (peak / 127).astype(np.float32)
        expand = [1] * len(shape)
        expand[axis] = -1
        q = np.clip(np.round(w / scale.reshape(expand)), -127, 127).astype(np.int8)
        stored_scale = scale if per_channel else scale[:1]
        index = self._tensor(name, shape, INT8, stored_scale, np.zeros_like(stored_scale, np.int64), q,
                             axis=axis if per_channel else 0)
        return index, q.astype(np.float32) * scale.reshape(expand), scale

    def _bias(self, name, x: Tensor, w_scale, channels):
        x_scale = self.quant[x.index][0]
        bias_scale = (np.float64(x_scale) * w_scale.astype(np.float64)).astype(np.float32)
        q = np.round(self.rng.normal(0, 0.5, channels) / bias_scale).astype(np.int32)
        index = self._tensor(name, (channels,), INT32, bias_scale, np.zeros(channels, np.int64), q)
        return index, q.astype(np.float64) * bias_scale

    def _int32_constant(self, name, values):
        values = np.asarray(values, np.int32)
        return self._tensor(name, values.shape, INT32, data=values)

    def _op(self, kind, inputs, outputs, options_type=0, options=None):
        if kind not in self.op_codes:
            self.op_codes.append(kind)
        op = schema.OperatorT()
        op.opcodeIndex = self.op_codes.index(kind)
        op.inputs, op.outputs = list(inputs), list(outputs)
        op.builtinOptionsType, op.builtinOptions = options_type, options
        self.operators.append(op)

    # ---- layers ----

    def input(self, shape, name="input", float_input=False, symbolic_batch=False, scale=None,
              zero_point=0) -> Tensor:
        """The model's input; `scale` and `zero_point` instead of the calibrated range if a scale is given."""
        calibration = self.rng.normal(0, 1, (self.calibration, *shape[1:])).astype(np.float32)
        if scale is not None:
            index = self._tensor(name, shape, INT8, np.float32(scale), zero_point)
            self.quant[index] = (float(np.float32(scale)), zero_point)
            self.inputs.append(index)
            return Tensor(index, self._fake_quantize(calibration, np.float32(scale), zero_point))
        signature = (-1, *shape[1:]) if symbolic_batch else None
        if float_input:
            index = self._tensor(name, shape, FLOAT32, signature=signature)
            self.inputs.append(index)
            quantized = self._activation(f"{name}_int8", calibration)
            self._op("QUANTIZE", [index], [quantized.index])
            return quantized
        tensor = self._activation(name, calibration)
        if signature is not None:
            self.tensors[tensor.index].shapeSignature = list(signature)
        self.inputs.append(tensor.index)
        return tensor

    def conv(self, x: Tensor, channels, kernel=3, stride=1, padding="same", activation="relu",
             depthwise=False, per_channel=True, name="conv", depth_multiplier=1) -> Tensor:
        """CONV_2D, or DEPTHWISE_CONV_2D where `depthwise` (output channel o reads input channel
        o // depth_multiplier, as TFLite's kernel does; `channels` is then C_in * depth_multiplier)."""
        n, h, w, c = x.calibration.shape
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        if depthwise:
            channels = c * depth_multiplier
            w_index, w_float, w_scale = self._weights(f"{name}_weights", (1, kh, kw, channels), 3, per_channel)
        else:
            w_index, w_float, w_scale = self._weights(f"{name}_weights", (channels, kh, kw, c), 0, per_channel)
        b_index, b_float = self._bias(f"{name}_bias", x, w_scale, channels)
        windows, (oh, ow) = _windows(x.calibration, kh, kw, stride, padding, 0.0)
        if depthwise:
            windows = np.repeat(windows, depth_multiplier, axis=3)  # output channel o reads o // multiplier
            out = np.einsum("nhwcij,ijc->nhwc", windows, w_float[0])
        else:
            out = np.einsum("nhwcij,oijc->nhwo", windows, w_float)
        out = out + b_float
        y = self._activation(f"{name}_out", out, activation)
        if depthwise:
            options = schema.DepthwiseConv2DOptionsT()
            options.depthMultiplier = depth_multiplier
            kind, options_type = "DEPTHWISE_CONV_2D", schema.BuiltinOptions.DepthwiseConv2DOptions
        else:
            options = schema.Conv2DOptionsT()
            kind, options_type = "CONV_2D", schema.BuiltinOptions.Conv2DOptions
        options.padding = schema.Padding.SAME if padding == "same" else schema.Padding.VALID
        options.strideH, options.strideW = (stride, stride) if isinstance(stride, int) else stride
        options.dilationHFactor = options.dilationWFactor = 1
        options.fusedActivationFunction = ACTIVATIONS[activation]
        self._op(kind, [x.index, w_index, b_index], [y.index], options_type, options)
        return y

    def fully_connected(self, x: Tensor, units, activation=None, per_channel=False, name="dense") -> Tensor:
        features = x.calibration.shape[-1]
        w_index, w_float, w_scale = self._weights(f"{name}_weights", (units, features), 0, per_channel)
        b_index, b_float = self._bias(f"{name}_bias", x, np.broadcast_to(w_scale, (units,)), units)
        out = x.calibration.reshape(-1, features) @ w_float.T + b_float
        y = self._activation(f"{name}_out", out.reshape(x.calibration.shape[:-1] + (units,)), activation)
        options = schema.FullyConnectedOptionsT()
        options.fusedActivationFunction = ACTIVATIONS[activation]
        options.keepNumDims = len(x.shape) > 2
        self._op("FULLY_CONNECTED", [x.index, w_index, b_index], [y.index],
                 schema.BuiltinOptions.FullyConnectedOptions, options)
        return y

    def add(self, a: Tensor, b: Tensor, activation=None, name="add") -> Tensor:
        y = self._activation(f"{name}_out", a.calibration + b.calibration, activation)
        options = schema.AddOptionsT()
        options.fusedActivationFunction = ACTIVATIONS[activation]
        self._op("ADD", [a.index, b.index], [y.index], schema.BuiltinOptions.AddOptions, options)
        return y

    def pool(self, x: Tensor, size, stride=None, padding="valid", kind="average", name="pool") -> Tensor:
        kh, kw = (size, size) if isinstance(size, int) else size
        stride = stride or kh
        whole = (kh, kw) == x.shape[1:3]  # a window as large as the map: one output whatever the stride
        windows, _ = _windows(x.calibration, kh, kw, 1 if whole else stride, padding, np.nan)
        if kind == "average":  # TFLite averages over the valid window positions only
            out = np.nanmean(windows, axis=(-2, -1))
        else:
            out = np.nanmax(windows, axis=(-2, -1))
        y = self._same_quant(f"{name}_out", x, out.astype(np.float32))
        options = schema.Pool2DOptionsT()
        options.padding = schema.Padding.SAME if padding == "same" else schema.Padding.VALID
        options.strideH = options.strideW = stride
        options.filterHeight, options.filterWidth = kh, kw
        options.fusedActivationFunction = ACTIVATIONS[None]
        op = "AVERAGE_POOL_2D" if kind == "average" else "MAX_POOL_2D"
        self._op(op, [x.index], [y.index], schema.BuiltinOptions.Pool2DOptions, options)
        return y

    def mean(self, x: Tensor, name="mean") -> Tensor:
        """Global average over H and W (keep_dims false), as Keras' GlobalAveragePooling2D converts."""
        y = self._activation(f"{name}_out", x.calibration.mean(axis=(1, 2)))
        options = schema.ReducerOptionsT()
        options.keepDims = False
        axes = self._int32_constant(f"{name}_axes", [1, 2])
        self._op("MEAN", [x.index, axes], [y.index], schema.BuiltinOptions.ReducerOptions, options)
        return y

    def reshape(self, x: Tensor, shape, name="reshape") -> Tensor:
        y = self._same_quant(f"{name}_out", x, x.calibration.reshape((self.calibration,) + tuple(shape[1:])))
        options = schema.ReshapeOptionsT()
        options.newShape = list(shape)
        target = self._int32_constant(f"{name}_shape", shape)
        self._op("RESHAPE", [x.index, target], [y.index], schema.BuiltinOptions.ReshapeOptions, options)
        return y

    def concat(self, parts: list[Tensor], axis=-1, name="concat") -> Tensor:
        """TFLite's int8 CONCATENATION keeps its inputs' scale (they must share it)."""
        if len({self.quant[p.index] for p in parts}) != 1:
            raise ValueError("the inputs of an int8 CONCATENATION share one scale and zero point")
        y = self._same_quant(f"{name}_out", parts[0], np.concatenate([p.calibration for p in parts], axis=axis))
        options = schema.ConcatenationOptionsT()
        options.axis = axis
        options.fusedActivationFunction = ACTIVATIONS[None]
        self._op("CONCATENATION", [p.index for p in parts], [y.index],
                 schema.BuiltinOptions.ConcatenationOptions, options)
        return y

    def split(self, x: Tensor, sizes, axis=-1, name="split") -> list[Tensor]:
        """SPLIT into equal parts (`sizes` all equal), else SPLIT_V; the parts keep the input's scale."""
        bounds = np.cumsum([0] + list(sizes))
        moved = np.moveaxis(x.calibration, axis, 0)
        parts = [self._same_quant(f"{name}_{i}", x, np.moveaxis(moved[start:stop], 0, axis))
                 for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:]))]
        axis_index = self._int32_constant(f"{name}_axis", np.int32(axis))
        outputs = [p.index for p in parts]
        if len(set(sizes)) == 1:
            options = schema.SplitOptionsT()
            options.numSplits = len(sizes)
            self._op("SPLIT", [axis_index, x.index], outputs, schema.BuiltinOptions.SplitOptions, options)
        else:
            options = schema.SplitVOptionsT()
            options.numSplits = len(sizes)
            size_splits = self._int32_constant(f"{name}_sizes", sizes)
            self._op("SPLIT_V", [x.index, size_splits, axis_index], outputs, schema.BuiltinOptions.SplitVOptions,
                     options)
        return parts

    def depth_to_space(self, x: Tensor, block: int, name="depth_to_space") -> Tensor:
        n, h, w, c = x.calibration.shape
        moved = x.calibration.reshape(n, h, w, block, block, c // block**2).transpose(0, 1, 3, 2, 4, 5)
        y = self._same_quant(f"{name}_out", x, moved.reshape(n, h * block, w * block, c // block**2))
        options = schema.DepthToSpaceOptionsT()
        options.blockSize = block
        self._op("DEPTH_TO_SPACE", [x.index], [y.index], schema.BuiltinOptions.DepthToSpaceOptions, options)
        return y

    def pad(self, x: Tensor, paddings, name="pad") -> Tensor:
        _, zero_point = self.quant[x.index]
        scale = self.quant[x.index][0]
        out = np.pad(x.calibration, [(0, 0)] + [tuple(p) for p in paddings[1:]],
                     constant_values=float((zero_point - zero_point) * scale))
        y = self._same_quant(f"{name}_out", x, out)
        amounts = self._int32_constant(f"{name}_paddings", paddings)
        self._op("PAD", [x.index, amounts], [y.index], schema.BuiltinOptions.PadOptions, schema.PadOptionsT())
        return y

    def softmax(self, x: Tensor, name="softmax") -> Tensor:
        shifted = x.calibration - x.calibration.max(axis=-1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
        index = self._tensor(f"{name}_out", x.shape, INT8, 1 / 256, -128)
        self.quant[index] = (1 / 256, -128)
        options = schema.SoftmaxOptionsT()
        options.beta = 1.0
        self._op("SOFTMAX", [x.index], [index], schema.BuiltinOptions.SoftmaxOptions, options)
        return Tensor(index, probabilities.astype(np.float32))

    def dequantize(self, x: Tensor, name="output") -> Tensor:
        index = self._tensor(name, x.shape, FLOAT32)
        self._op("DEQUANTIZE", [x.index], [index])
        return Tensor(index, x.calibration)

    def _output(self, name, calibration, scale=None, zero_point=0) -> Tensor:
        """An int8 tensor of the given quantization, or calibrated on `calibration` where no scale is given."""
        if scale is None:
            return self._activation(name, calibration)
        index = self._tensor(name, (1,) + calibration.shape[1:], INT8, np.float32(scale), zero_point)
        self.quant[index] = (float(np.float32(scale)), zero_point)
        return Tensor(index, calibration.astype(np.float32))

    def elementwise(self, x: Tensor, kind, scale=None, zero_point=0, alpha=0.2, name=None) -> Tensor:
        """An int8 activation (ELEMENTWISE, or LEAKY_RELU with `alpha`); LOGISTIC and TANH take TFLite's fixed
        output quantization."""
        name = name or kind.lower()
        if kind == "LEAKY_RELU":
            out = np.where(x.calibration >= 0, x.calibration, alpha * x.calibration)
        else:
            out = ELEMENTWISE[kind](x.calibration)
        scale, zero_point = FIXED_OUTPUT.get(kind, (scale, zero_point))
        y = self._output(f"{name}_out", out, scale, zero_point)
        options_type, options = 0, None
        if kind == "LEAKY_RELU":
            options_type, options = schema.BuiltinOptions.LeakyReluOptions, schema.LeakyReluOptionsT()
            options.alpha = alpha
        self._op(kind, [x.index], [y.index], options_type, options)
        return y

    def _quantized_constant(self, name, values: np.ndarray) -> tuple[int, np.ndarray]:
        """An int8 constant quantized per tensor over its range, and the float values it holds."""
        low, high = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
        scale = np.float32(max(high - low, 1e-3) / 255)
        zero_point = int(np.clip(np.round(-128 - low / scale), -128, 127))
        q = np.clip(np.round(values / scale) + zero_point, -128, 127).astype(np.int8)
        index = self._tensor(name, values.shape, INT8, scale, zero_point, q)
        return index, ((q.astype(np.float32) - zero_point) * scale).astype(np.float32)

    def prelu(self, x: Tensor, alpha: np.ndarray, scale=None, zero_point=0, name="prelu") -> Tensor:
        """PRELU with a per-channel `alpha` of shape (1, 1, C) (Keras' shared_axes=[1, 2])."""
        alpha_index, alpha_float = self._quantized_constant(f"{name}_alpha", np.asarray(alpha, np.float32))
        out = np.where(x.calibration >= 0, x.calibration, alpha_float * x.calibration)
        y = self._output(f"{name}_out", out, scale, zero_point)
        self._op("PRELU", [x.index, alpha_index], [y.index])
        return y

    def mul(self, a: Tensor, b, scale=None, zero_point=0, activation=None,
            name="mul") -> Tensor:
        """MUL of two int8 tensors (`b` may broadcast: a (1, 1, 1, C) gate), or of a tensor and a constant
        (`b` an array: a scalar or a per-channel vector, quantized per tensor)."""
        if not isinstance(b, Tensor):
            index, values = self._quantized_constant(f"{name}_constant", np.asarray(b, np.float32))
            b = Tensor(index, values)
        out = a.calibration * b.calibration
        if activation is not None:
            out = np.maximum(out, 0) if activation == "relu" else np.clip(out, 0, 6)
        y = self._output(f"{name}_out", out, scale, zero_point)
        options = schema.MulOptionsT()
        options.fusedActivationFunction = ACTIVATIONS[activation]
        self._op("MUL", [a.index, b.index], [y.index], schema.BuiltinOptions.MulOptions, options)
        return y

    def share_quantization(self, tensors: list[Tensor]) -> None:
        """Give `tensors` one scale and zero point covering all their calibrated values, as the converter does for
        the inputs of a MAXIMUM or MINIMUM (the op's same-scale constraint)."""
        low = min(min(float(t.calibration.min()) for t in tensors), 0.0)
        high = max(max(float(t.calibration.max()) for t in tensors), 0.0)
        scale = np.float32(max(high - low, 1e-3) / 255)
        zero_point = int(np.clip(np.round(-128 - low / scale), -128, 127))
        for t in tensors:
            quantization = self.tensors[t.index].quantization
            quantization.scale, quantization.zeroPoint = [float(scale)], [zero_point]
            self.quant[t.index] = (float(scale), zero_point)

    def extremum(self, a: Tensor, b, kind="MAXIMUM", name=None) -> Tensor:
        """MAXIMUM or MINIMUM of two int8 tensors (`b` may broadcast), or of a tensor and a constant (`b` an
        array, quantized as `a`). The output takes `a`'s quantization, as the converter writes the op (its inputs
        and output share one scale and zero point)."""
        name = name or kind.lower()
        if not isinstance(b, Tensor):
            scale, zero_point = self.quant[a.index]
            values = np.asarray(b, np.float32)
            q = np.clip(np.round(values / scale) + zero_point, -128, 127).astype(np.int8)
            index = self._tensor(f"{name}_constant", values.shape, INT8, np.float32(scale), zero_point, q)
            b = Tensor(index, ((q.astype(np.float32) - zero_point) * np.float32(scale)).astype(np.float32))
        function = np.maximum if kind == "MAXIMUM" else np.minimum
        y = self._same_quant(f"{name}_out", a, function(a.calibration, b.calibration))
        self._op(kind, [a.index, b.index], [y.index])
        return y

    def resize(self, x: Tensor, size, kind="nearest", align_corners=False, half_pixel_centers=False,
               scale=None, zero_point=0, name="resize") -> Tensor:
        """RESIZE_NEAREST_NEIGHBOR or RESIZE_BILINEAR to `size` (height, width); the output keeps the input's
        quantization unless `scale` is given."""
        (h, w), (out_h, out_w) = x.shape[1:3], size
        rows = np.minimum(np.arange(out_h) * h // out_h, h - 1)
        cols = np.minimum(np.arange(out_w) * w // out_w, w - 1)
        out = x.calibration[:, rows][:, :, cols]  # nearest, for the calibration only
        if scale is None:
            y = self._same_quant(f"{name}_out", x, out)
        else:
            y = self._output(f"{name}_out", out, scale, zero_point)
        if kind == "nearest":
            op, options_type, options = ("RESIZE_NEAREST_NEIGHBOR", schema.BuiltinOptions.ResizeNearestNeighborOptions,
                                         schema.ResizeNearestNeighborOptionsT())
        else:
            op, options_type, options = ("RESIZE_BILINEAR", schema.BuiltinOptions.ResizeBilinearOptions,
                                         schema.ResizeBilinearOptionsT())
        options.alignCorners, options.halfPixelCenters = align_corners, half_pixel_centers
        self._op(op, [x.index, self._int32_constant(f"{name}_size", list(size))], [y.index], options_type, options)
        return y

    # ---- the model ----

    def build(self, outputs: list[Tensor], name="model") -> bytes:
        import flatbuffers

        graph = schema.SubGraphT()
        graph.tensors, graph.operators = self.tensors, self.operators
        graph.inputs, graph.outputs = self.inputs, [o.index for o in outputs]
        graph.name = "main"
        model = schema.ModelT()
        model.version = 3
        model.description = name
        model.subgraphs = [graph]
        model.buffers = self.buffers
        model.operatorCodes = []
        for kind in self.op_codes:
            code = schema.OperatorCodeT()
            code.builtinCode = getattr(schema.BuiltinOperator, kind)
            code.deprecatedBuiltinCode = min(code.builtinCode, 127)
            code.version = OP_VERSIONS[kind]
            model.operatorCodes.append(code)
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def _windows(x: np.ndarray, kh: int, kw: int, stride, padding: str, pad_value: float):
    """Sliding windows [N, OH, OW, C, KH, KW] of an NHWC batch with TFLite's SAME/VALID padding (`stride` an
    int or (rows, columns))."""
    n, h, w, c = x.shape
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    if padding == "same":
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = max((oh - 1) * sh + kh - h, 0), max((ow - 1) * sw + kw - w, 0)
        x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)],
                   constant_values=pad_value)
    else:
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
    return windows[:, ::sh, ::sw][:, :oh, :ow], (oh, ow)


# ---- networks ----------------------------------------------------------------


def tiny_conv(**input_options) -> bytes:
    b = TfliteBuilder(seed=1)
    x = b.input((1, 8, 8, 3), **input_options)
    y = b.conv(x, 8, name="conv1")
    return b.build([y], "tiny_conv")


def every_op() -> bytes:
    """One of each supported TFLite op, small."""
    b = TfliteBuilder(seed=2)
    x = b.input((1, 8, 8, 3))
    x = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], name="pad")
    a = b.conv(x, 8, stride=1, padding="valid", activation="relu6", name="conv")
    d = b.conv(a, 8, depthwise=True, activation="relu", name="dw")
    s = b.add(a, d, activation="relu", name="add")
    m = b.pool(s, 2, kind="max", name="maxpool")
    p = b.pool(m, 2, stride=1, padding="same", kind="average", name="avgpool")
    c = b.concat([m, p], axis=-1, name="concat")
    g = b.mean(c, name="mean")
    r = b.reshape(g, (1, 16), name="reshape")
    f = b.fully_connected(r, 10, name="fc")
    y = b.softmax(f, name="softmax")
    return b.build([y], "every_op")


def compared_branches(kinds=("MAXIMUM", "MINIMUM"), seed=5) -> bytes:
    """input -> CONV_2D (left) and CONV_2D (right) of one scale and zero point; each of `kinds` of the two
    (MAXIMUM, MINIMUM: Keras' Maximum and Minimum layers), concatenated where there are several; a 1x1 CONV_2D."""
    b = TfliteBuilder(seed=seed)
    x = b.input((1, 6, 5, 3))
    left = b.conv(x, 8, activation=None, name="left")
    right = b.conv(x, 8, activation=None, name="right")
    b.share_quantization([left, right])
    compared = [b.extremum(left, right, kind, name=kind.lower()) for kind in kinds]
    y = compared[0] if len(compared) == 1 else b.concat(compared, name="joined")
    return b.build([b.conv(y, 4, kernel=1, name="head")], "compared_branches")


def conv_stack(per_channel=True) -> bytes:
    """Convolutions down to a 1 x 1 map, then a dense classifier: no pooling by averaging."""
    b = TfliteBuilder(seed=3)
    x = b.input((1, 10, 10, 3))
    x = b.conv(x, 8, stride=1, activation="relu6", per_channel=per_channel, name="conv1")
    x = b.conv(x, 8, depthwise=True, stride=2, activation="relu", per_channel=per_channel, name="dw1")
    x = b.pool(x, 2, kind="max", name="pool1")
    x = b.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], name="pad1")
    x = b.conv(x, 16, kernel=3, padding="valid", per_channel=per_channel, name="conv2")
    x = b.conv(x, 16, kernel=2, padding="valid", activation="relu", per_channel=per_channel, name="conv3")
    x = b.reshape(x, (1, 16), name="flatten")
    x = b.fully_connected(x, 10, name="dense")
    return b.build([x], "conv_stack")


def residual() -> bytes:
    """A ResNet-8-style block: two convolutions and the shortcut added, then a dense classifier."""
    b = TfliteBuilder(seed=4)
    x = b.input((1, 8, 8, 4))
    x = b.conv(x, 8, name="stem")
    y = b.conv(x, 8, name="block_conv1")
    y = b.conv(y, 8, activation=None, name="block_conv2")
    x = b.add(x, y, activation="relu", name="block_add")
    x = b.pool(x, 2, kind="max", name="pool")
    x = b.conv(x, 16, kernel=4, padding="valid", name="head")
    x = b.reshape(x, (1, 16), name="flatten")
    return b.build([b.fully_connected(x, 10, name="dense")], "residual")


def pooled(global_pool=True) -> bytes:
    """Average pooling as TFLite writes it: a 3 x 3 window with SAME padding (the divisor counts the valid
    elements), and (global_pool) a window as large as the map before the classifier."""
    b = TfliteBuilder(seed=5)
    x = b.input((1, 8, 8, 3))
    x = b.conv(x, 8, name="conv")
    x = b.pool(x, 3, stride=1, padding="same", kind="average", name="smooth")
    if global_pool:
        x = b.pool(x, 8, kind="average", name="global_pool")
    else:
        x = b.conv(x, 8, kernel=8, padding="valid", name="head")
    x = b.reshape(x, (1, 8), name="flatten")
    return b.build([b.fully_connected(x, 10, name="dense")], "pooled")


def float_io() -> bytes:
    """Float input and output around the int8 network, as TFLite's converter writes with float I/O."""
    b = TfliteBuilder(seed=6)
    x = b.input((1, 8, 8, 3), float_input=True)
    x = b.conv(x, 8, stride=2, name="conv")
    x = b.conv(x, 8, kernel=4, padding="valid", name="head")
    x = b.reshape(x, (1, 8), name="flatten")
    return b.build([b.dequantize(b.fully_connected(x, 10, name="dense"))], "float_io")


def classifier(float_io=False) -> bytes:
    """A DS-CNN-style keyword classifier: a strided stem, depthwise-separable blocks, global average pool,
    dense layer and Softmax (int8 output, or float through DEQUANTIZE)."""
    b = TfliteBuilder(seed=7)
    x = b.input((1, 12, 8, 1), float_input=float_io)
    x = b.conv(x, 16, kernel=(5, 3), stride=2, name="stem")
    for block in range(2):
        x = b.conv(x, 16, depthwise=True, name=f"dw{block}")
        x = b.conv(x, 16, kernel=1, name=f"pw{block}")
    x = b.pool(x, x.shape[1:3], kind="average", name="pool")
    x = b.reshape(x, (1, 16), name="flatten")
    y = b.softmax(b.fully_connected(x, 12, name="dense"), name="softmax")
    return b.build([b.dequantize(y) if float_io else y], "classifier")


def mobilenet() -> bytes:
    """A MobileNetV1-style visual-wake-words net: strided stem, depthwise-separable blocks with Relu6 (one
    strided), global average pool, dense layer, Softmax."""
    b = TfliteBuilder(seed=10)
    x = b.input((1, 16, 16, 3))
    x = b.conv(x, 8, stride=2, activation="relu6", name="stem")
    for block, (channels, stride) in enumerate([(16, 1), (16, 2), (32, 1)]):
        x = b.conv(x, x.shape[-1], depthwise=True, stride=stride, activation="relu6", name=f"dw{block}")
        x = b.conv(x, channels, kernel=1, activation="relu6", name=f"pw{block}")
    x = b.pool(x, x.shape[1:3], kind="average", name="pool")
    x = b.reshape(x, (1, 32), name="flatten")
    return b.build([b.softmax(b.fully_connected(x, 4, name="dense"), name="softmax")], "mobilenet")


def resnet8() -> bytes:
    """A ResNet-8-style CIFAR net (smaller): stem, three residual stages (the strided ones with a 1 x 1
    shortcut), global average pool, dense layer, Softmax."""
    b = TfliteBuilder(seed=11)
    x = b.input((1, 16, 16, 3))
    x = b.conv(x, 8, name="stem")
    for stage, (channels, stride) in enumerate([(8, 1), (16, 2), (16, 2)]):
        y = b.conv(x, channels, stride=stride, name=f"stage{stage}_conv1")
        y = b.conv(y, channels, activation=None, name=f"stage{stage}_conv2")
        if stride != 1 or channels != x.shape[-1]:
            x = b.conv(x, channels, kernel=1, stride=stride, activation=None, name=f"stage{stage}_shortcut")
        x = b.add(x, y, activation="relu", name=f"stage{stage}_add")
    x = b.pool(x, x.shape[1:3], kind="average", name="pool")
    x = b.reshape(x, (1, 16), name="flatten")
    return b.build([b.softmax(b.fully_connected(x, 10, name="dense"), name="softmax")], "resnet8")


def autoencoder() -> bytes:
    """The anomaly-detection autoencoder's shape (dense layers with Relu, a narrow bottleneck), smaller,
    per-tensor weights as TFLite's converter writes for dense layers."""
    b = TfliteBuilder(seed=12)
    x = b.input((1, 64))
    for layer, units in enumerate([32, 32, 8, 32, 32]):
        x = b.fully_connected(x, units, activation="relu", name=f"dense{layer}")
    return b.build([b.fully_connected(x, 64, name="output")], "autoencoder")


def global_mean() -> bytes:
    """Keras' GlobalAveragePooling2D as TFLite writes it (MEAN over height and width) before the classifier."""
    b = TfliteBuilder(seed=13)
    x = b.input((1, 8, 8, 3))
    x = b.conv(x, 16, stride=2, name="conv")
    x = b.conv(x, 16, name="conv2")
    x = b.mean(x, name="gap")
    return b.build([b.fully_connected(x, 10, name="dense")], "global_mean")


def inception() -> bytes:
    """Two branches concatenated along the channels (TFLite keeps one scale for a CONCATENATION's inputs
    and output: both branches are max pools of the same map), then a classifier."""
    b = TfliteBuilder(seed=14)
    x = b.input((1, 8, 8, 3))
    x = b.conv(x, 8, name="stem")
    wide = b.pool(x, 3, stride=2, padding="same", kind="max", name="wide")
    narrow = b.pool(x, 2, stride=2, kind="max", name="narrow")
    x = b.concat([wide, narrow], axis=-1, name="concat")
    x = b.conv(x, 16, kernel=4, padding="valid", name="head")
    x = b.reshape(x, (1, 16), name="flatten")
    return b.build([b.fully_connected(x, 10, name="dense")], "inception")
