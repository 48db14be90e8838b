"""The host side of an accelerator built by ming: numpy only, so it runs on the board as it runs in ming.

* The numeric contract's host steps, bit-exact with onnxruntime (QuantizeLinear, DequantizeLinear,
  QLinearSoftmax) and the float steps after the accelerator (`host_tail`, on a whole batch of images at
  once); ming's golden model uses these same functions.
* The bus layout: an image is the int8 values of its (C, H, W) map in raster order (row, column,
  channel), packed 8 to a 64-bit little-endian word, the last word zero-padded (`pack_images`,
  `unpack_images`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT8_MIN, INT8_MAX = -128, 127
# The integer types of model inputs and outputs: how far above the accelerator's int8 values theirs lie
INTEGER_OFFSETS = {"int8": 0, "uint8": 128}
VALUES_PER_WORD = 8  # int8 values per 64-bit bus word


@dataclass(frozen=True)
class HostOp:
    """A step run on the host after the accelerator (an output's tail) or before it (an input's).

    kind: "softmax" (attr: axis), "quantize"/"dequantize" (attrs: scale, zero_point), "reshape" (attr: shape, one
    image's, its batch axis included), "transpose" (attr: axes, one image's), "tflite_softmax" (attr: scale, the
    Softmax's beta), "tflite_quantize" (TFLite's QUANTIZE of floats: attrs scale, zero_point), "tflite_requantize"
    (TFLite's QUANTIZE of integers into integers, `tflite_requantize`;
    attrs: scale, the input's scale over the output's, input_zero_point, zero_point; uint8 zero points shifted into
    int8 as the values are), and the float post-processing of a model's output (a detector's box decoding,
    `onnx_tail`): "table" (values: the 256 float32 results of the first steps for each int8 value -128..127, in
    place of dequantizing), "add"/"sub"/"mul"/"div" (the values x op c, c a float32 constant of `shape` given by
    `values`) and "rsub"/"rdiv" (c - x, c / x).
    """

    kind: str
    axis: int = -1
    scale: float = 1.0
    zero_point: int = 0
    shape: tuple = ()
    values: tuple = ()
    axes: tuple = ()
    input_zero_point: int = 0

    @classmethod
    def of(cls, data: dict) -> "HostOp":
        """The step as the build's metadata (host.json, accelerator.json) records it (`as_data`)."""
        return cls(data["kind"], data["axis"], data["scale"], data["zero_point"], tuple(data["shape"]),
                   tuple(data.get("values", ())), tuple(data.get("axes", ())), data.get("input_zero_point", 0))

    def as_data(self) -> dict:
        """The step for the build's metadata: every step's five fields, and the fields of its own kind."""
        data = {"kind": self.kind, "axis": self.axis, "scale": self.scale, "zero_point": self.zero_point,
                "shape": list(self.shape)}
        if self.values:
            data["values"] = [float(v) for v in self.values]
        if self.kind == "transpose":
            data["axes"] = list(self.axes)
        if self.kind == "tflite_requantize":
            data["input_zero_point"] = self.input_zero_point
        return data


LAYOUT_STEPS = ("reshape", "transpose")  # host steps that move values, on any element type


def saturate(v, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """Clamp to ``[qmin, qmax]`` and cast to the narrowest matching integer dtype."""
    if qmin >= INT8_MIN and qmax <= INT8_MAX:
        dtype = np.int8
    elif qmin >= 0 and qmax <= 255:
        dtype = np.uint8
    else:
        dtype = np.int32
    return np.clip(np.asarray(v, dtype=np.int64), qmin, qmax).astype(dtype)


def _f32_scalar(v) -> np.float32:
    """A per-tensor scale as a float32 scalar (accepts shape () or (1,) arrays)."""
    return np.float32(np.asarray(v, dtype=np.float32).reshape(()))


def ort_dequantize_linear(x, scale, zp: int) -> np.ndarray:
    """``f32(scale * f32(x - zp))`` (ORT DequantizeLinear / ``dequantize_value``: ``x - zp`` in int32), in two
    passes over `x` with no int64 or float64 copy of it (a batch of maps is megabytes)."""
    difference = np.subtract(x, np.int32(zp), dtype=np.int32)
    return np.multiply(difference, _f32_scalar(scale), dtype=np.float32)


def ort_quantize_linear(v, scale, zp: int, qmin: int = INT8_MIN, qmax: int = INT8_MAX) -> np.ndarray:
    """MLAS ``MlasQuantizeLinear``: ``sat(rne(f32(v / scale)) + zp)`` (zp added as int)."""
    q = np.rint((np.asarray(v, np.float32) / _f32_scalar(scale)).astype(np.float32).astype(np.float64))
    q = np.clip(q, -2.0 ** 40, 2.0 ** 40).astype(np.int64)
    return saturate(q + int(zp), qmin, qmax)


def ort_qlinear_softmax(x, x_scale, y_scale, y_zp: int, axis: int) -> np.ndarray:
    """onnxruntime's QLinearSoftmax (contrib op that QDQ Softmax becomes), on int8 ``x``.

    A float32 table ``T[d] = f32(exp((d + b) * sx))`` over ``d = x - max(x)`` with
    ``b = max(0, ln(FLT_MAX / D) - 5) / sx`` (D = size of the softmax axis) keeps the
    sum finite; the sum is accumulated in float32 in element order; each output is
    ``rne(f32(f32(T * floor(1 / sy)) / sum)) + zy`` saturated at the top (the kernel runs
    in the uint8 domain after onnxruntime's int8-to-uint8 rewrite, so 256 -> 255).
    The input zero point cancels in ``x - max(x)``.
    """
    x = np.moveaxis(np.asarray(x, dtype=np.int64), axis, -1)
    size = x.shape[-1]
    sx = float(_f32_scalar(x_scale))
    shift = max(0.0, float(np.log(np.finfo(np.float32).max / size)) - 5.0) / sx
    table = np.exp((x - x.max(axis=-1, keepdims=True) + shift) * sx).astype(np.float32)
    total = np.zeros(x.shape[:-1], np.float32)
    for i in range(size):  # float32, in element order, as the kernel accumulates
        total = (total + table[..., i]).astype(np.float32)
    y_scale_inverse = np.float32(np.floor(np.float32(1.0) / _f32_scalar(y_scale)))
    ratio = ((table * y_scale_inverse).astype(np.float32) / total[..., None]).astype(np.float32)
    y = np.rint(ratio.astype(np.float64)).astype(np.int64) + int(y_zp)
    return np.moveaxis(saturate(y, INT8_MIN, INT8_MAX), -1, axis)


def tflite_quantize(v, scale, zp: int) -> np.ndarray:
    """TFLite's QUANTIZE (reference AffineQuantize): ``sat(round_half_away(f32(v / scale)) + zp)``."""
    q = (np.asarray(v, np.float32) / _f32_scalar(scale)).astype(np.float32).astype(np.float64)
    q = np.clip(np.sign(q) * np.floor(np.abs(q) + 0.5), -2.0 ** 40, 2.0 ** 40).astype(np.int64)
    return saturate(q + int(zp), INT8_MIN, INT8_MAX)


QUANTIZERS = {"onnxruntime": ort_quantize_linear, "tflite": tflite_quantize}


def model_input_values(x, scale: float, zero_point: int, dtype: str, quantizer: str = "onnxruntime") -> np.ndarray:
    """The int8 values the accelerator takes for the model's input `x`.

    A float input is quantized as the model's runtime does: a float32 model input by its own quantizer
    (`quantizer`: onnxruntime's QuantizeLinear rounds half to even, TFLite's QUANTIZE half away from zero), the
    float images given to a model whose input is int8 or uint8 as TFLite's QUANTIZE does (`tflite_quantize`:
    ``sat(round_half_away(x / scale) + zero_point)``, with the input's scale and zero point; a uint8 model's
    zero point is shifted into int8 like its values). A model whose input is already int8 (TFLite, or ONNX
    converted from it) takes its values as they are, a uint8 one shifted by -128 (the frontend made the model
    int8 by the same shift).
    """
    if dtype == "float32":
        return QUANTIZERS[quantizer](x, scale, zero_point).astype(np.int64)
    values = np.asarray(x)
    if values.dtype.kind == "f" and values.dtype.fields is None:
        return tflite_quantize(values, scale, zero_point).astype(np.int64)
    offset = INTEGER_OFFSETS[dtype]
    if values.dtype.kind not in "iu" or \
            (values.size and (values.min() < INT8_MIN + offset or values.max() > INT8_MAX + offset)):
        raise ValueError(input_type_problem(values, dtype, scale, zero_point) or
                         f"the model takes {dtype} values; this input is {values.dtype}")
    return values.astype(np.int64) - offset


def input_type_problem(x, dtype: str, scale: float, zero_point: int) -> str | None:
    """Why a model whose input is `dtype` ("float32", "int8" or "uint8") does not take the array `x`, naming
    the conversion it does take, in one line; None when it takes `x`'s element type.

    Every model takes float images (float32 from a file); a model whose input is int8 or uint8 also takes its
    own integers, of exactly that type, and quantizes float images with its input's `scale` and `zero_point`
    (shifted into int8 for uint8, as the metadata holds it). An integer array of another type is told the
    conversion by its values: the other 8-bit type (or values in its range) shifted by 128 when the model's
    int8 zero point is -128 (uint8 with zero point 0 is int8 with zero point -128), values in the model's
    range cast, anything else converted to float32 and quantized.
    """
    x = np.asarray(x)
    if x.dtype.fields is None and (x.dtype.kind == "f" or str(x.dtype) == dtype):
        return None
    if dtype == "float32":
        return f"input is {x.dtype}, the model takes float32; save x.astype(numpy.float32)"
    offset = INTEGER_OFFSETS[dtype]
    quantization = f"scale {float(scale):.9g}, zero point {zero_point + offset}"
    takes = f"input is {x.dtype}, the model takes {dtype} values ({quantization}) or float32 images, which it " \
            "quantizes with them"
    as_float = f"{takes}; save x.astype(numpy.float32) (real values, not quantized ones)"
    if x.dtype.fields is not None or x.dtype.kind not in "iu" or x.size == 0:
        return as_float
    low, high = INT8_MIN + offset, INT8_MAX + offset
    lowest, highest = int(x.min()), int(x.max())
    other = "uint8" if dtype == "int8" else "int8"
    sign, shift = ("-", -128) if dtype == "int8" else ("+", 128)
    shifted = (f"{takes}; save (x.astype(numpy.int16) {sign} 128).astype(numpy.{dtype}): {other} values with "
               f"zero point {zero_point + offset - shift} are {dtype} values with zero point {zero_point + offset} "
               "shifted by 128")
    if str(x.dtype) == other:
        return shifted if zero_point == INT8_MIN else as_float
    if low <= lowest and highest <= high:
        return f"{takes}; save x.astype(numpy.{dtype}) (its values are in {dtype}'s range)"
    if zero_point == INT8_MIN and low <= lowest + shift and highest + shift <= high:
        return shifted
    return as_float


def accelerator_input(x, port) -> np.ndarray:
    """The int8 values (int64 array) the accelerator takes for the model's input array `x`.

    `port` is the input's description (ming's GraphInput, or a Port of the build's metadata). `x` has the
    model's shape, or images stacked on axis 0 in place of the batch dimension of 1. The model's own steps right
    after its input (TFLite's QUANTIZE of integers, RESHAPE, TRANSPOSE: `port.host_ops`) run here in their
    order, then the reordering by `port.permutation` (the model's Transpose right after its input, NHWC models'
    channels moved first): they are the host's, not hardware.
    """
    q = model_input_values(x, port.scale, port.zero_point, port.dtype, port.quantizer)
    q = _input_steps(q, port.onnx_shape, getattr(port, "host_ops", ()))
    return np.transpose(q, port.permutation) if port.permutation else q


def _input_steps(q: np.ndarray, model_shape, host_ops) -> np.ndarray:
    """`q` (one image of `model_shape`, or images stacked on axis 0) through the input's host steps; the
    images on axis 0 in place of the batch axis of the last step's shape."""
    if not host_ops:
        return q
    images = q.reshape((-1,) + tuple(model_shape))
    for op in host_ops:
        if op.kind == "tflite_requantize":
            images = tflite_requantize(images, op.scale, op.input_zero_point, op.zero_point).astype(np.int64)
        elif op.kind == "dequantize":
            images = ort_dequantize_linear(images, op.scale, op.zero_point)
        elif op.kind == "tflite_quantize":
            images = tflite_quantize(images, op.scale, op.zero_point).astype(np.int64)
        else:
            images = _layout_step(images, op)
    shape = images.shape[1:]
    return images.reshape((len(images),) + (shape[1:] if shape[:1] == (1,) else (-1,)))


def _layout_step(images: np.ndarray, op: HostOp) -> np.ndarray:
    """A reshape or transpose of one image's axes, on images stacked on axis 0."""
    if op.kind == "reshape":
        return images.reshape((len(images),) + tuple(op.shape))
    if op.kind == "transpose":
        return np.transpose(images, (0, *(1 + np.asarray(op.axes, dtype=np.int64))))
    raise ValueError(f"unknown host op {op.kind}")


def input_layout_shape(port) -> tuple:
    """The shape of the model's input array in the accelerator's layout: after the input's layout steps
    (`accelerator_input`) and its permutation."""
    shape = tuple(port.onnx_shape)
    for op in getattr(port, "host_ops", ()):
        if op.kind == "reshape":
            shape = tuple(op.shape)
        elif op.kind == "transpose":
            shape = tuple(shape[a] for a in op.axes)
    return graph_layout_shape(shape, port.permutation)


def model_output(q: np.ndarray, port) -> np.ndarray:
    """The model's output for one image from the accelerator's int8 values `q` of output `port`."""
    return model_output_of_images(np.asarray(q)[None], port)[0]


def model_output_of_images(q: np.ndarray, port) -> np.ndarray:
    """The model's outputs for a batch, stacked on axis 0, from the accelerator's int8 values `q` of output
    `port` (images, *the accelerator's layout of one image): the whole batch at once, no loop over images."""
    y = host_tail(q, port.scale, port.zero_point, port.host_ops, port.dtype)
    y = y.reshape((len(y),) + graph_layout_shape(port.onnx_shape, port.permutation))
    return np.transpose(y, (0, *(1 + np.argsort(port.permutation)))) if port.permutation else y


def graph_layout_shape(model_shape, permutation) -> tuple:
    """The shape of an array of `model_shape` in the accelerator's layout (see `accelerator_input`)."""
    return tuple(model_shape[a] for a in permutation) if permutation else tuple(model_shape)


def host_tail(images: np.ndarray, scale: float, zero_point: int, host_ops, dtype: str = "float32") -> np.ndarray:
    """Run the host steps after the accelerator on its int8 outputs `images` (stacked on axis 0), for every
    image at once; the steps' axes and shapes are those of one image.

    The values stay integers through the integer steps (TFLite's Softmax and QUANTIZE) and the layout steps; a
    float step (or the end, for a float output) dequantizes them with the accelerator's `scale` and `zero_point`
    unless a "dequantize" step says how. An integer model output (`dtype` "int8" or "uint8") is the values the
    steps leave, shifted by +128 for uint8.
    """
    ops = list(host_ops)
    kinds = [op.kind for op in ops]
    x, quantization = images, (scale, zero_point)  # the integers' quantization (None: not the accelerator's)
    if kinds[:2] == ["softmax", "quantize"] and "dequantize" in kinds[2:]:
        # onnxruntime fuses DequantizeLinear -> Softmax -> QuantizeLinear into QLinearSoftmax unless the
        # quantized values are the model's output; then it runs the float Softmax and QuantizeLinear
        x = ort_qlinear_softmax(images, scale, ops[1].scale, ops[1].zero_point, _batch_axis(ops[0].axis, images))
        quantization, ops = None, ops[2:]
    integer = True
    if kinds[:1] == ["table"]:  # onnxruntime's own results of the first float steps, per int8 value
        x = np.asarray(ops[0].values, np.float32)[np.asarray(images, np.int64) - INT8_MIN]
        integer, quantization, ops = False, None, ops[1:]
    for op in ops:
        if op.kind == "tflite_softmax":  # int8 in, int8 out (scale 1/256, zero point -128), on the last axis
            x, quantization = tflite_softmax(x, _known(quantization, op)[0], op.scale), (1 / 256, INT8_MIN)
        elif op.kind == "tflite_requantize":
            x, quantization = tflite_requantize(x, op.scale, op.input_zero_point, op.zero_point), None
        elif op.kind in LAYOUT_STEPS:
            x = _layout_step(np.asarray(x), op)
        else:
            if integer and op.kind != "dequantize":
                x = ort_dequantize_linear(x, *_known(quantization, op))
            x = _host_op(x, op)
            integer = op.kind in ("quantize", "tflite_quantize")
            quantization = (op.scale, op.zero_point) if integer else None
    if dtype in INTEGER_OFFSETS:
        return model_integers(x, dtype)
    return ort_dequantize_linear(x, *_known(quantization, None)) if integer else x


def _known(quantization, op) -> tuple[float, int]:
    """The quantization of integers a step takes: known unless an integer step left others."""
    if quantization is None:
        raise ValueError(f"host step {op.kind if op else 'the float output'} follows integers of unknown "
                         "quantization (a 'dequantize' step must come first)")
    return quantization


def _batch_axis(axis: int, images: np.ndarray) -> int:
    """An image's `axis` as the axis of `images`, the images stacked on axis 0."""
    rank = np.ndim(images) - 1
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is not an axis of an image of shape {np.shape(images)[1:]}")
    return axis % rank + 1


def model_integers(q, dtype: str) -> np.ndarray:
    """int8 values as the model gives them: int8, or uint8 (shifted by +128)."""
    return (np.asarray(q).astype(np.int64) + INTEGER_OFFSETS[dtype]).astype(np.dtype(dtype))


_ELEMENTWISE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rsub": np.subtract,
                "rdiv": np.divide}


def _host_op(x: np.ndarray, op: HostOp) -> np.ndarray:
    """One host step on images stacked on axis 0."""
    if op.kind == "softmax":
        axis = _batch_axis(op.axis, x)
        shifted = np.exp(x - x.max(axis=axis, keepdims=True))
        return (shifted / shifted.sum(axis=axis, keepdims=True)).astype(np.float32)
    if op.kind == "quantize":
        return ort_quantize_linear(x, op.scale, op.zero_point).astype(np.int64)
    if op.kind == "dequantize":
        return ort_dequantize_linear(x, op.scale, op.zero_point)
    if op.kind == "tflite_quantize":
        return tflite_quantize(x, op.scale, op.zero_point).astype(np.int64)
    if op.kind in _ELEMENTWISE:
        constant = np.asarray(op.values, np.float32).reshape(op.shape)
        first, second = (constant, x) if op.kind in ("rsub", "rdiv") else (x, constant)
        return _ELEMENTWISE[op.kind](first, second, dtype=np.float32)  # IEEE float32, as onnxruntime's kernels
    raise ValueError(f"unknown host op {op.kind}")


def words_per_image(values: int) -> int:
    return -(-values // VALUES_PER_WORD)


def to_stream_order(maps: np.ndarray, stream_shape) -> np.ndarray:
    """(images, C, H, W) maps -> (images, values): each image in raster order (row, column, channel)."""
    c, h, w = stream_shape
    return maps.reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(-1, c * h * w)


def from_stream_order(values: np.ndarray, stream_shape) -> np.ndarray:
    """(images, values) in raster order -> (images, C, H, W)."""
    c, h, w = stream_shape
    return values.reshape(-1, h, w, c).transpose(0, 3, 1, 2)


def pack_images(q: np.ndarray, stream_shape, words: np.ndarray) -> None:
    """int8 maps (images, C, H, W) into `words` (images x words per image uint64, e.g. a DMA buffer)."""
    values = to_stream_order(q, stream_shape)
    images, count = values.shape
    padded = np.zeros((images, words_per_image(count) * VALUES_PER_WORD), dtype=np.int8)
    padded[:, :count] = values
    words[:] = padded.view("<u8").reshape(-1)


def unpack_images(words: np.ndarray, stream_shape) -> np.ndarray:
    """`words` (images x words per image uint64) -> int8 maps (images, C, H, W)."""
    c, h, w = stream_shape
    count = c * h * w
    values = np.ascontiguousarray(words, dtype="<u8").view(np.int8)
    padded = values.reshape(-1, words_per_image(count) * VALUES_PER_WORD)
    return from_stream_order(padded[:, :count], stream_shape)


# ---- TFLite's int8 Softmax (reference kernel: gemmlowp fixed point) ----------------------------------
# tflite::reference_ops::Softmax for int8 input and output, step by step: the input differences to the
# row's maximum scaled to Q5.26, exp() of them in Q0.31 (gemmlowp's exp_on_negative_values), their sum in
# Q12.19, its reciprocal (Newton-Raphson), the products rounded to the output's 1/256 steps. C++ integer
# semantics (truncating division, arithmetic shifts) are reproduced on int64 arrays holding int32 values.

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def _srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    product = a * b
    nudged = product + np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))  # C++ division truncates toward zero
    return np.where((a == b) & (a == _I32_MIN), _I32_MAX, high)


def _rounding_divide_by_pot(x, exponent):
    x = np.asarray(x, np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _saturating_shift_left(x, exponent: int):
    x = np.asarray(x, np.int64)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, _I32_MAX, np.where(x < -threshold, _I32_MIN, x << exponent))


def _exp_on_interval(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out (Taylor expansion around -1/8)."""
    constant_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = _rounding_divide_by_pot(x4, 2)
    polynomial = _rounding_divide_by_pot(_srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + _srdhm(constant_term, x + polynomial)


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
               (4, 242))


def _exp_on_negative_values(a):
    """exp(a) for a <= 0 in Q5.26, result in Q0.31."""
    fractional_bits = 26
    quarter = 1 << (fractional_bits - 2)
    mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(_saturating_shift_left(mod_quarter_minus_quarter, 5))
    remainder = mod_quarter_minus_quarter - a
    for exponent, multiplier in _EXP_BARREL:
        bit = (remainder & (1 << (fractional_bits + exponent))) != 0
        result = np.where(bit, _srdhm(result, multiplier), result)
    return np.where(a == 0, _I32_MAX, result)


def _reciprocal(x, integer_bits: int):
    """tflite::GetReciprocal: (1 / x in Q0.31 scaled by a power of two, that power's exponent)."""
    x = np.asarray(x, np.int64)
    leading_zeros = 32 - _bit_length(x)
    bits_over_unit = integer_bits - leading_zeros
    shifted_minus_one = ((x << leading_zeros) & 0xFFFFFFFF) - (1 << 31)
    total = shifted_minus_one + _I32_MAX  # RoundingHalfSum(a, One()), truncating toward zero
    half_denominator = np.where(total >= 0, (total + 1) // 2, -((1 - total) // 2))
    x2 = 1515870810 + _srdhm(half_denominator, -1010580540)  # Q2.29 Newton-Raphson from 48/17 - 32/17 d
    for _ in range(3):
        one_minus = (1 << 29) - _srdhm(half_denominator, x2)
        x2 = x2 + _saturating_shift_left(_srdhm(x2, one_minus), 2)
    return _saturating_shift_left(x2, 1), bits_over_unit


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Python's int.bit_length of every value (|x| < 2**53: exact in float64, whose frexp exponent it is)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: `real` as a Q31 multiplier and a power-of-two exponent (left shift if
    positive), the mantissa rounded half away from zero; exponents below -31 give 0."""
    if real == 0:
        return 0, 0
    mantissa, exponent = np.frexp(real)
    fixed = int(np.sign(mantissa) * np.floor(abs(mantissa) * (1 << 31) + 0.5))
    if fixed == 1 << 31:
        fixed, exponent = fixed // 2, exponent + 1
    if exponent < -31:
        return 0, 0
    return fixed, int(exponent)


def tflite_requantize(q, scale: float, input_zero_point: int, zero_point: int) -> np.ndarray:
    """TFLite's QUANTIZE of int8 (or uint8) values into int8 (or uint8), reference_ops::Requantize:
    sat(MultiplyByQuantizedMultiplier(q - input_zero_point, QuantizeMultiplier(scale)) + zero_point) with
    `scale` the input's over the output's (in double), the multiply TFLite's SaturatingRoundingDoublingHighMul
    of the value shifted left by a positive exponent, then its rounding right shift by a negative one. uint8
    values and zero points come shifted into int8 (by -128 on both sides: the result is the same)."""
    multiplier, exponent = quantize_multiplier(float(scale))
    x = np.asarray(q, np.int64) - int(input_zero_point)
    scaled = _srdhm(x * (1 << max(exponent, 0)), multiplier)
    y = _rounding_divide_by_pot(scaled, max(-exponent, 0)) + int(zero_point)
    return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int64)


def _quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    mantissa, exponent = np.frexp(real)
    fixed = int(np.sign(mantissa) * np.floor(abs(mantissa) * (1 << 31) + 0.5))
    if fixed == 1 << 31:
        fixed, exponent = fixed // 2, exponent + 1
    return fixed, int(exponent)


def tflite_softmax(q: np.ndarray, input_scale: float, beta: float) -> np.ndarray:
    """TFLite's int8 Softmax (reference kernel) along the last axis: int8 in (`input_scale`), int8 out
    (scale 1/256, zero point -128)."""
    q = np.asarray(q, np.int64)
    integer_bits = 5
    real = min(float(beta) * float(np.float32(input_scale)) * (1 << (31 - integer_bits)), float((1 << 31) - 1))
    multiplier, left_shift = _quantize_multiplier_greater_than_one(real)
    radius = int(np.floor(((1 << integer_bits) - 1) * float(1 << (31 - integer_bits)) / float(1 << left_shift)))
    diff = q - q.max(axis=-1, keepdims=True)
    used = diff >= -radius
    exps = _exp_on_negative_values(_srdhm(diff * (1 << left_shift), multiplier))
    total = np.where(used, _rounding_divide_by_pot(exps, 12), 0).sum(axis=-1, keepdims=True)
    scale, bits_over_unit = _reciprocal(total, 12)
    unsaturated = _rounding_divide_by_pot(_srdhm(scale, exps), bits_over_unit + 31 - 8)
    return np.where(used, np.clip(unsaturated - 128, INT8_MIN, INT8_MAX), INT8_MIN).astype(np.int64)
