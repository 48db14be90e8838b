"""TFLite models (written directly, tests/tflite_models.py) whose tensors hold one value: a FULLY_CONNECTED to one
unit (or of a one-value input) followed by every table op ming takes, by ADD and MUL of two such values, or ending
the model, as a regression head or TFLite Micro's hello_world ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import tflite_models

# the table ops (frontends/tflite_tables.TABLE_OPS) the builder writes with one input: LOGISTIC and TANH take
# TFLite's fixed output quantization; PRELU has a constant alpha
TABLE_OPS = ("LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "ELU", "RELU", "RELU6", "RELU_N1_TO_1")


def fc_one_unit_then(op: str, features: int = 8):
    """`features` inputs -> FULLY_CONNECTED to one unit -> `op` (a table op, "PRELU", or "MUL_CONSTANT")."""
    def build(b: tflite_models.TfliteBuilder):
        x = b.input((1, features))
        y = b.fully_connected(x, 1, name="fc")
        if op == "PRELU":
            return [b.prelu(y, np.array([0.25], np.float32), name="prelu")]
        if op == "MUL_CONSTANT":
            return [b.mul(y, np.float32(0.75), name="mul")]
        return [b.elementwise(y, op, name=op.lower())]
    return build


def one_value_input_then(op: str):
    """A one-value input -> FULLY_CONNECTED to 4 units -> FULLY_CONNECTED to one unit -> `op`."""
    def build(b: tflite_models.TfliteBuilder):
        x = b.input((1, 1))
        y = b.fully_connected(x, 4, activation="relu", name="fc0")
        y = b.fully_connected(y, 1, name="fc1")
        return [b.elementwise(y, op, name=op.lower())]
    return build


def two_one_unit_heads(join: str):
    """Two FULLY_CONNECTED heads to one unit of one vector, joined by ADD or MUL, then LOGISTIC."""
    def build(b: tflite_models.TfliteBuilder):
        x = b.input((1, 6))
        left = b.fully_connected(x, 1, name="fc_left")
        right = b.fully_connected(x, 1, name="fc_right")
        y = b.add(left, right, name="add") if join == "ADD" else b.mul(left, right, name="mul")
        return [b.elementwise(y, "LOGISTIC", name="logistic")]
    return build


def one_unit_outputs():
    """A one-unit head ending the model beside a LOGISTIC of it: two outputs of one value each."""
    def build(b: tflite_models.TfliteBuilder):
        x = b.input((1, 5))
        y = b.fully_connected(x, 1, name="fc")
        return [y, b.elementwise(y, "LOGISTIC", name="logistic")]
    return build


def map_to_one_unit_then(op: str):
    """A conv on a 4x4x2 map, FULLY_CONNECTED of the flattened map to one unit, then `op`."""
    def build(b: tflite_models.TfliteBuilder):
        x = b.input((1, 4, 4, 2))
        y = b.conv(x, 3, kernel=3, name="conv")
        y = b.reshape(y, (1, 48), name="flatten")
        y = b.fully_connected(y, 1, name="fc")
        return [b.elementwise(y, op, name=op.lower())]
    return build


MODELS = {
    **{f"fc_1_unit_then_{op.lower()}": fc_one_unit_then(op) for op in TABLE_OPS + ("PRELU", "MUL_CONSTANT")},
    **{f"one_value_input_then_{op.lower()}": one_value_input_then(op) for op in ("LOGISTIC", "TANH")},
    "two_1_unit_heads_add": two_one_unit_heads("ADD"),
    "two_1_unit_heads_mul": two_one_unit_heads("MUL"),
    "1_unit_outputs": one_unit_outputs(),
    "map_to_1_unit_then_logistic": map_to_one_unit_then("LOGISTIC"),
    "map_to_1_unit_then_hard_swish": map_to_one_unit_then("HARD_SWISH"),
}


def write(name: str, directory: Path, seed: int = 3) -> Path:
    b = tflite_models.TfliteBuilder(seed=seed)
    outputs = MODELS[name](b)
    path = Path(directory) / f"{name}.tflite"
    path.write_bytes(b.build(outputs, name))
    return path
