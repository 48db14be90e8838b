"""What a model path holds, told before any frontend reads it: a TFLite flatbuffer (whatever its name), or a
model ming does not take (Keras, PyTorch, TensorFlow), with the way to export it to one it takes.

numpy-free and IREE-free: `ming build`, `ming reference` and `ming sweep` call `foreign_model_problem` before the
slow import (options.check_model), the frontends again on the path they are given (pipeline.lift, onnx_model).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

TAKES = "ming takes int8-quantized ONNX (QDQ or QOperator) and int8 TFLite models"
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
TFLITE_IDENTIFIER = b"TFL3"  # the flatbuffer's file identifier, bytes 4 to 8

KERAS_SUFFIXES = (".h5", ".hdf5", ".keras")
PYTORCH_SUFFIXES = (".pt", ".pth")
TENSORFLOW_SUFFIXES = (".pb", ".pbtxt", ".savedmodel")

_TFLITE_INT8 = ("tf.lite.TFLiteConverter.{source} with int8 quantization (optimizations=[tf.lite.Optimize.DEFAULT], "
                "a representative_dataset of input images) and pass the .tflite")
_QUANTIZE_ONNX = "quantize the .onnx with onnxruntime.quantization.quantize_static"
_ADVICE = {
    "keras": ("a Keras model", "convert it with " + _TFLITE_INT8.format(source="from_keras_model") +
              f", or export it with tf2onnx and {_QUANTIZE_ONNX}"),
    "pytorch": ("a PyTorch model", f"export it with torch.onnx.export, {_QUANTIZE_ONNX} (int8, with a "
                "CalibrationDataReader of input images) and pass that .onnx"),
    "tensorflow": ("a TensorFlow SavedModel or graph", "convert the SavedModel directory with " +
                   _TFLITE_INT8.format(source="from_saved_model") +
                   f", or export it with tf2onnx (--saved-model) and {_QUANTIZE_ONNX}"),
}


def _head(path: Path, size: int = 16) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read(size)
    except OSError:
        return b""


def is_tflite(path: str | Path) -> bool:
    """A .tflite path, or a file that is a TFLite flatbuffer by its identifier whatever its name."""
    path = Path(path)
    return path.suffix.lower() == ".tflite" or (path.is_file() and _head(path, 8)[4:8] == TFLITE_IDENTIFIER)


def foreign_kind(path: str | Path) -> str | None:
    """"keras", "pytorch" or "tensorflow" for a model ming does not take, by its name or its first bytes; None
    for anything else (an ONNX or TFLite model, or a file the frontends will judge)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        if suffix == ".savedmodel" or (path / "saved_model.pb").is_file() or (path / "saved_model.pbtxt").is_file():
            return "tensorflow"
        if (path / "keras_metadata.pb").is_file():
            return "tensorflow"
        return None
    if not path.is_file():
        return None
    head = _head(path)
    if head[4:8] == TFLITE_IDENTIFIER:
        return None
    if suffix in KERAS_SUFFIXES or head.startswith(HDF5_MAGIC):
        return "keras"
    if suffix in PYTORCH_SUFFIXES:
        return "pytorch"
    if suffix in TENSORFLOW_SUFFIXES:
        return "tensorflow"
    if head.startswith(b"PK\x03\x04"):  # a zip: PyTorch's format (data.pkl inside), or Keras 3's .keras
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (OSError, zipfile.BadZipFile):
            return None
        if any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
            return "pytorch"
        if "model.weights.h5" in names or "config.json" in names and "metadata.json" in names:
            return "keras"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):  # a pickle: torch.save's old format
        return "pytorch"
    return None


def foreign_model_problem(path: str | Path) -> str | None:
    """One line naming a model ming does not take and how to export it to one it takes, or None."""
    kind = foreign_kind(path)
    if kind is None:
        return None
    what, how = _ADVICE[kind]
    return f"{path}: {what}, not one ming compiles; {TAKES}: {how}"
