"""The ports of an accelerator as its metadata (accelerator.json, host.json) states them, and the images a
port takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:
    from . import ming_host  # inside the ming package
    from .ming_errors import DeployError
except ImportError:
    import ming_host  # in OUT/deploy, beside this file
    from ming_errors import DeployError


@dataclass(frozen=True)
class Port:
    """One side of the accelerator: the model's tensor, its quantization and its bus layout."""

    onnx_name: str
    onnx_shape: tuple
    array_shape: tuple  # the accelerator's layout of the tensor
    stream_shape: tuple  # (C, H, W) of the map on the stream
    scale: float
    zero_point: int
    values: int  # int8 values per image
    words: int  # 64-bit bus words per image
    dtype: str = "float32"  # the model's element type here: "float32", "int8" or "uint8"
    permutation: tuple = ()  # the model's array -> the accelerator's layout (ming_host.accelerator_input)
    host_ops: tuple = ()  # the steps after the accelerator (outputs)
    quantizer: str = "onnxruntime"  # whose rounding quantizes a float input (ming_host.QUANTIZERS)
    index: int = 0  # an output's place among the model's outputs

    @classmethod
    def of(cls, data: dict) -> "Port":
        c, h, w = data["stream_shape"]
        return cls(data["onnx_name"], tuple(data["onnx_shape"]), tuple(data["array_shape"]), (c, h, w), data["scale"],
                   data["zero_point"], c * h * w, data["words"], data["dtype"],
                   tuple(data["permutation"]), tuple(map(ming_host.HostOp.of, data.get("host_ops", ()))),
                   data.get("quantizer", "onnxruntime"), data.get("index", 0))

    @property
    def image_shape(self) -> tuple:
        """The shape of one image: the model's shape without its batch dimension of 1."""
        return self.onnx_shape[1:] if len(self.onnx_shape) > 1 and self.onnx_shape[0] == 1 else self.onnx_shape


def input_images(x, port: Port) -> np.ndarray:
    """`x` as (images, *image shape) for the input `port`: the model's own shape is one image. `x` is float
    (taken as float32; a model whose input is int8 or uint8 quantizes it as TFLite's QUANTIZE does) with only
    finite values, or has the model's own integer type (`ming_host.input_type_problem`)."""
    x = np.asarray(x)
    if x.dtype.kind == "f" and x.dtype.fields is None:
        x = x.astype(np.float32)
    problem = ming_host.input_type_problem(x, port.dtype, port.scale, port.zero_point)
    if problem:
        raise DeployError(problem)
    shape = port.image_shape
    if x.shape == port.onnx_shape:
        images = x.reshape((1,) + shape)
    elif x.shape[1:] == shape and x.shape[0] > 0:
        images = x
    else:
        raise DeployError(f"input has shape {x.shape}; the model takes {port.onnx_shape} (one image) or "
                          f"(N, {', '.join(map(str, shape))}) for N images")
    bad = int(images.size - np.count_nonzero(np.isfinite(images))) if images.dtype == np.float32 else 0
    if bad:
        raise DeployError(f"input has {bad} non-finite values (NaN or Inf); int8 quantization needs finite inputs")
    return images



def output_names(meta: dict) -> list[str]:
    """The model's outputs in its own order (the metadata lists them in the order of the output record)."""
    return [data["onnx_name"] for data in sorted(meta["outputs"], key=lambda data: data["index"])]
