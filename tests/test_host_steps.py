"""The host steps around the accelerator that TFLite models' boundaries need (`ming_host`): an input's QUANTIZE of
integers, RESHAPE and TRANSPOSE before its permutation, an output's after the un-permutation. A batch of images
gives each image's result bit for bit, the steps survive the build's metadata (host.json, accelerator.json), and
the driver's checks of that metadata refuse damaged steps in one line."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from ming_py.contract import accelerator_schema, ming_host, ming_ports
from ming_py.contract.ming_host import HostOp

pytestmark = pytest.mark.unit

INPUT_STEPS = (HostOp("tflite_requantize", scale=0.0305 / 0.0217, zero_point=-3, input_zero_point=4),
               HostOp("reshape", shape=(1, 8, 6, 2)), HostOp("transpose", axes=(0, 2, 1, 3)))


def input_port(host_ops=INPUT_STEPS, dtype="uint8", permutation=(0, 3, 1, 2)) -> ming_ports.Port:
    """A (1, 96) uint8 input the model views as an 8 x 6 x 2 map, transposed to 6 x 8 x 2 (NHWC), then moved
    channels first."""
    return ming_ports.Port("x", (1, 96), (2, 6, 8), (2, 6, 8), 0.0305, 4, 96, 12, dtype, permutation, host_ops,
                            "tflite")


def test_the_input_steps_run_in_the_models_order_before_the_permutation():
    x = np.random.default_rng(0).integers(0, 256, (1, 96)).astype(np.uint8)
    q = ming_host.accelerator_input(x, input_port())
    values = ming_host.tflite_requantize(x.astype(np.int64) - 128, 0.0305 / 0.0217, 4, -3)
    nhwc = values.reshape(1, 8, 6, 2).transpose(0, 2, 1, 3)
    assert np.array_equal(q.reshape(2, 6, 8), nhwc[0].transpose(2, 0, 1))
    assert ming_host.input_layout_shape(input_port()) == (1, 2, 6, 8)


@pytest.mark.parametrize("images", [1, 3, 16])
def test_a_batch_of_inputs_gives_each_images_values(images):
    port = input_port()
    x = np.random.default_rng(images).integers(0, 256, (images, 96)).astype(np.uint8)
    batch = ming_host.accelerator_input(x, port).reshape(images, -1)
    alone = np.stack([ming_host.accelerator_input(image[None], port).reshape(-1) for image in x])
    assert np.array_equal(batch, alone)


@pytest.mark.parametrize("images", [1, 5])
def test_an_output_in_the_models_layout_of_a_batch_equals_each_image(images):
    """The accelerator's (4, 8, 8) map back to the model's NHWC, reshaped to (64, 4), requantized to uint8."""
    steps = (HostOp("reshape", shape=(1, 4, 8, 8)), HostOp("transpose", axes=(0, 2, 3, 1)),
             HostOp("reshape", shape=(1, 64, 4)), HostOp("tflite_requantize", scale=0.61, zero_point=-20,
                                                        input_zero_point=-8))
    port = ming_ports.Port("y", (1, 64, 4), (4, 8, 8), (4, 8, 8), 0.0024, -8, 256, 32, "uint8", (), steps)
    q = np.random.default_rng(images).integers(-128, 128, (images, 4, 8, 8)).astype(np.int8)
    batch = ming_host.model_output_of_images(q, port)
    alone = np.stack([ming_host.model_output(image, port) for image in q])
    assert batch.dtype == np.uint8 and batch.shape == (images, 1, 64, 4)
    assert np.array_equal(batch, alone)
    nhwc = q.astype(np.int64).transpose(0, 2, 3, 1).reshape(images, 1, 64, 4)
    assert np.array_equal(batch, ming_host.tflite_requantize(nhwc, 0.61, -8, -20) + 128)


def test_the_steps_survive_the_metadata():
    for op in INPUT_STEPS + (HostOp("tflite_softmax", scale=1.0), HostOp("dequantize", scale=0.5, zero_point=3)):
        assert HostOp.of(op.as_data()) == op
    assert set(HostOp("reshape", shape=(1, 4)).as_data()) == {"kind", "axis", "scale", "zero_point", "shape"}


def _host(port: ming_ports.Port) -> dict:
    data = {"onnx_name": port.onnx_name, "onnx_shape": list(port.onnx_shape), "array_shape": list(port.array_shape),
            "stream_shape": list(port.stream_shape), "words": port.words, "scale": port.scale,
            "zero_point": port.zero_point, "dtype": port.dtype, "permutation": list(port.permutation),
            "quantizer": port.quantizer, "host_ops": [op.as_data() for op in port.host_ops]}
    output = dict(data, onnx_name="y", dtype="int8", permutation=[], index=0, host_ops=[])
    return {"model": "m", "input": data, "outputs": [output]}


def test_the_drivers_checks_take_input_steps_and_refuse_damaged_ones():
    host = _host(input_port())
    assert accelerator_schema.host_problem(host) is None
    assert ming_ports.Port.of(host["input"]).host_ops == INPUT_STEPS
    for change, message in (
            (lambda h: h["input"]["host_ops"][2].update(axes=[0, 1, 1, 3]), "not a permutation"),
            (lambda h: h["input"]["host_ops"][1].update(shape=[1, 8, 6, 3]), "host_ops' give the shape"),
            (lambda h: h["input"]["host_ops"][0].update(kind="softmax"), "not one of reshape"),
            (lambda h: h["input"]["host_ops"][0].update(input_zero_point=200), "outside int8's range"),
            (lambda h: h["input"].update(host_ops={}), "'input.host_ops' is not a list")):
        damaged = copy.deepcopy(host)
        change(damaged)
        problem = accelerator_schema.host_problem(damaged)
        assert problem is not None and message in problem and "\n" not in problem, problem
