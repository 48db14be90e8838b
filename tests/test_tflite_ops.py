"""TFLite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR: the nearest resizes that repeat each pixel by whole
factors become one `Upsample` (`tflite_fold.resizes_as_repeats`), the bilinear ones by whole factors one
`BilinearResize` with LiteRT's integer tables; `ming reference` and the C-simulation must equal LiteRT's
reference kernels (BUILTIN_REF) on every value; every other resize is refused naming the node."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite_models
from emit_helpers import csim
from ming_py import reference
from ming_py.errors import MingError
from ming_py.frontends.tflite_fold import bilinear_tables, nearest_indices
from ming_py.ir import BilinearResize, Upsample
from ming_py.pipeline import lift
from test_tflite import tflite_reference

# (scale, zero point) of the map the resize reads
SCALES = [(0.05, 3), (0.013, -128), (0.2, 77)]
# (input height, width, output height, width, align_corners, half_pixel_centers): repeats in LiteRT
REPEATS = [(4, 3, 8, 6, False, False), (3, 5, 6, 15, False, True), (4, 3, 12, 3, False, False),
           (5, 4, 10, 8, True, False), (2, 2, 8, 6, True, False), (4, 4, 4, 8, False, True)]


def resize_model(geometry, kind="nearest", scale=0.05, zero_point=3, conv_before=False, conv_after=True,
                 output_scale=None, seed=0) -> bytes:
    h, w, out_h, out_w, align, half = geometry
    b = tflite_models.TfliteBuilder(seed=seed)
    x = b.input((1, h, w, 3), scale=scale, zero_point=zero_point)
    if conv_before:
        x = b.conv(x, 4, name="conv")
    y = b.resize(x, (out_h, out_w), kind, align, half, scale=output_scale, zero_point=zero_point)
    if conv_after:
        y = b.conv(y, 4, kernel=1, name="head")
    return b.build([y], "resized")


def every_value(shape) -> np.ndarray:
    """An int8 input that cycles through all 256 values."""
    return (np.arange(int(np.prod(shape))) % 256 - 128).astype(np.int8).reshape(shape)


def litert_resize(h, w, out_h, out_w, align, half) -> np.ndarray:
    """LiteRT's nearest resize (BUILTIN_REF) of a map whose every pixel holds its own index."""
    b = tflite_models.TfliteBuilder()
    x = b.input((1, h, w, 1), scale=1.0, zero_point=0)
    y = b.resize(x, (out_h, out_w), "nearest", align, half)
    interpreter = Interpreter(model_content=b.build([y]), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                           (np.arange(h * w) - 128).astype(np.int8).reshape(1, h, w, 1))
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])[0, :, :, 0].astype(np.int64) + 128


@pytest.mark.unit
@pytest.mark.parametrize("align, half", [(False, False), (False, True), (True, False), (True, True)])
def test_nearest_indices_are_litert_reference_kernel_on_every_pixel(align, half):
    """The index rule ming decides repeats by equals what LiteRT's reference kernel reads, on every output pixel
    of sizes 1-7 resized by factors 1-4 (and some non-integer ratios)."""
    for h, w, fh, fw in itertools.product(range(1, 8), range(1, 8), range(1, 5), range(1, 5)):
        if (h + w + fh + fw) % 3:  # a third of the grid keeps the test short
            continue
        out_h, out_w = h * fh + (h > 2 and fw == 3), w * fw
        expected = litert_resize(h, w, out_h, out_w, align, half)
        rows, cols = nearest_indices(h, out_h, align, half), nearest_indices(w, out_w, align, half)
        assert np.array_equal(rows[:, None] * w + cols[None, :], expected), (h, w, out_h, out_w)


@pytest.mark.unit
def test_which_nearest_resizes_are_repeats():
    """Measured: half-pixel centres alone keep every whole-factor resize a repeat; align_corners keeps factor 2
    and maps 2 pixels wide; both together shift every pixel (refused)."""
    def repeat(n, f, align, half):
        return np.array_equal(nearest_indices(n, n * f, align, half), np.arange(n * f) // f)

    sizes = range(1, 65)
    assert all(repeat(n, f, False, half) for n in sizes for f in range(1, 9) for half in (False, True))
    assert all(repeat(n, 2, True, False) and repeat(n, 1, True, False) for n in sizes)
    assert repeat(2, 5, True, False) and not repeat(4, 3, True, False)
    assert not any(repeat(n, f, True, True) for n in range(2, 65) for f in range(1, 9))


@pytest.mark.parametrize("geometry", REPEATS)
@pytest.mark.parametrize("scale, zero_point", SCALES)
def test_nearest_resize_equals_litert_reference(tmp_path, geometry, scale, zero_point):
    path = tmp_path / "resized.tflite"
    path.write_bytes(resize_model(geometry, scale=scale, zero_point=zero_point))
    graph = lift(path)
    (upsample,) = [n for n in graph.nodes if isinstance(n, Upsample)]
    h, w, out_h, out_w = geometry[:4]
    assert upsample.source == "resize_out" and upsample.factors == (1, out_h // h, out_w // w)
    x = every_value((1, h, w, 3))
    assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


@pytest.mark.parametrize("geometry", REPEATS[:3])
def test_nearest_resize_as_the_model_output_equals_litert_reference(tmp_path, geometry):
    path = tmp_path / "resized.tflite"
    path.write_bytes(resize_model(geometry, conv_before=True, conv_after=False, seed=3))
    graph = lift(path)
    x = every_value((1, *geometry[:2], 3))
    ours, expected = reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x)
    assert ours.shape == expected.shape == (1, *geometry[2:4], 4) and np.array_equal(ours, expected)


@pytest.mark.parametrize("kind", ["nearest", "bilinear"])
@pytest.mark.parametrize("align, half", [(False, False), (False, True), (True, False)])
def test_a_resize_by_one_is_the_map_itself(tmp_path, kind, align, half):
    path = tmp_path / "same_size.tflite"
    path.write_bytes(resize_model((5, 4, 5, 4, align, half), kind, scale=0.02, zero_point=-7, conv_before=True))
    graph = lift(path)
    assert not [n for n in graph.nodes if isinstance(n, Upsample)]
    x = every_value((1, 5, 4, 3))
    assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


@pytest.mark.parametrize("kind, geometry, options, message", [
    ("nearest", (4, 3, 12, 6), (True, False), r"with align_corners=True and half_pixel_centers=False, LiteRT's "
                                              r"nearest resize of 4 to 12 along rows is not a repeat"),
    ("nearest", (4, 4, 4, 4), (True, True), r"with align_corners=True and half_pixel_centers=True"),
    ("nearest", (4, 4, 6, 8), (False, False), r"resizes 4x4 to 6x8; ming takes only upsampling by whole factors"),
    ("nearest", (4, 4, 2, 2), (False, False), r"resizes 4x4 to 2x2"),
    ("bilinear", (4, 4, 6, 8), (False, True), r"resizes 4x4 to 6x8; ming takes only upsampling by whole factors"),
    ("bilinear", (86, 2, 516, 4), (False, False), r"resizing 86 to 516 rows, LiteRT's 10-bit scale reads past the "
                                                  r"last row of the map"),
])
def test_resizes_that_are_not_repeats_are_refused_by_name(tmp_path, kind, geometry, options, message):
    path = tmp_path / "refused.tflite"
    path.write_bytes(resize_model((*geometry, *options), kind))
    op = "RESIZE_NEAREST_NEIGHBOR" if kind == "nearest" else "RESIZE_BILINEAR"
    with pytest.raises(MingError, match=rf"^node 'resize_out' \({op}\): {message}") as error:
        lift(path)
    assert "\n" not in str(error.value)


@pytest.mark.unit
def test_a_resize_that_requantizes_is_refused_by_name(tmp_path):
    path = tmp_path / "requantized.tflite"
    path.write_bytes(resize_model((4, 4, 8, 8, False, False), output_scale=0.1))
    with pytest.raises(MingError, match=r"^node 'resize_out' \(RESIZE_NEAREST_NEIGHBOR\): its input and output "
                                        r"quantization differ"):
        lift(path)


@pytest.mark.parametrize("geometry, conv_after", [((4, 3, 8, 6, False, True), True),
                                                  ((5, 4, 10, 8, True, False), False)])
def test_csim_of_a_nearest_resize_equals_litert_reference(tmp_path, geometry, conv_after):
    path = tmp_path / "resized.tflite"
    path.write_bytes(resize_model(geometry, conv_before=True, conv_after=conv_after, seed=5))
    graph = lift(path)
    x = every_value((1, *geometry[:2], 3))
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), tflite_reference(path, x))


def test_a_model_that_computes_nothing_is_one_clear_error(tmp_path):
    """input -> a resize by one -> output lifts to no node at all: refused in one line, not an empty design."""
    path = tmp_path / "nothing.tflite"
    path.write_bytes(resize_model((5, 4, 5, 4, False, False), conv_after=False))
    with pytest.raises(MingError, match=r"nothing\.tflite: the model computes nothing between its input and its "
                                        r"outputs"):
        lift(path)


# ---- RESIZE_BILINEAR: LiteRT's integer interpolation ------------------------------------------------------------

BILINEAR = [(4, 3, 8, 6, False, True), (3, 5, 9, 15, False, True), (4, 4, 8, 8, False, False),
            (3, 4, 6, 12, True, False), (2, 3, 8, 3, False, True), (5, 4, 7, 9, False, True), (6, 6, 3, 4, True, False)]


def litert_bilinear(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool) -> np.ndarray:
    """LiteRT's RESIZE_BILINEAR (BUILTIN_REF) of the int8 NHWC map `x`."""
    b = tflite_models.TfliteBuilder()
    source = b.input(x.shape, scale=0.05, zero_point=3)
    y = b.resize(source, (out_h, out_w), "bilinear", align, half)
    interpreter = Interpreter(model_content=b.build([y]), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


@pytest.mark.unit
@pytest.mark.parametrize("geometry", BILINEAR)
def test_bilinear_tables_give_litert_integer_interpolation(geometry):
    """`bilinear_tables` and `reference.bilinear_resize` == LiteRT's int8 kernel on every value of random maps,
    at whole and other factors, downscaling included, with each corner flag."""
    h, w, out_h, out_w, align, half = geometry
    rows, cols = bilinear_tables(h, out_h, align, half), bilinear_tables(w, out_w, align, half)
    assert all(w0 + w1 == 1024 for *_, w0, w1 in rows + cols)
    rng = np.random.default_rng(h * 100 + out_w)
    for x in (rng.integers(-128, 128, (1, h, w, 4), dtype=np.int8), np.full((1, h, w, 4), -128, np.int8),
              np.full((1, h, w, 4), 127, np.int8)):
        ours = reference.bilinear_resize(x[0].transpose(2, 0, 1), rows, cols).transpose(1, 2, 0)[None]
        assert np.array_equal(ours, litert_bilinear(x, out_h, out_w, align, half))


@pytest.mark.parametrize("geometry", [g for g in BILINEAR if g[2] % g[0] == 0 and g[3] % g[1] == 0])
def test_a_bilinear_upsampling_equals_litert_reference(tmp_path, geometry):
    path = tmp_path / "bilinear.tflite"
    path.write_bytes(resize_model(geometry, "bilinear", conv_before=True, seed=5))
    graph = lift(path)
    (resize,) = [n for n in graph.nodes if isinstance(n, BilinearResize)]
    assert resize.source == "resize_out" and not [n for n in graph.nodes if isinstance(n, Upsample)]
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-128, 128, (1, *geometry[:2], 3), dtype=np.int8)
        assert np.array_equal(reference.run(graph, x)[graph.outputs[0].name], tflite_reference(path, x))


@pytest.mark.parametrize("geometry, conv_after", [((4, 3, 8, 6, False, True), True),
                                                  ((3, 4, 6, 12, True, False), False)])
def test_csim_of_a_bilinear_upsampling_equals_litert_reference(tmp_path, geometry, conv_after):
    path = tmp_path / "bilinear.tflite"
    path.write_bytes(resize_model(geometry, "bilinear", conv_before=True, conv_after=conv_after, seed=5))
    graph = lift(path)
    x = every_value((1, *geometry[:2], 3))
    assert np.array_equal(csim(graph, tmp_path / "out", x, check_ports=True), tflite_reference(path, x))
