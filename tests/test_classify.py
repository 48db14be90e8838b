"""Classification (MING Alg. 1 and 2) on hand-written and IREE-produced access maps."""

from __future__ import annotations

import pytest

from ming_py.classify import WindowAxis, classify, detect_sliding_window, iterator_sets, window_axis
from ming_py.ir import PARALLEL, REDUCTION, AccessMap, AffineExpr, Arg, Kernel, Op, Operand

P, R = PARALLEL, REDUCTION


def expr(n: int, *terms: tuple[int, int], constant: int = 0) -> AffineExpr:
    coeffs = [0] * n
    for dim, coeff in terms:
        coeffs[dim] += coeff
    return AffineExpr(tuple(coeffs), constant)


def amap(n: int, *results) -> AccessMap:
    return AccessMap(n, tuple(r if isinstance(r, AffineExpr) else expr(n, (r, 1)) for r in results))


def kernel(iterators, inputs, output) -> Kernel:
    dims = (4,) * len(iterators)
    mac = Op("add", (Arg(len(inputs)), Op("mul", (Arg(0), Arg(1))))) if len(inputs) == 2 else Arg(0)
    return Kernel("k", "k", dims, tuple(iterators), tuple(Operand(f"t{i}", m) for i, m in enumerate(inputs)),
                  Operand("out", output), mac, 0)


def conv2d(kh_coeff=(1, 1), stride=(1, 1), dilation=(1, 1)):
    """(oc, oh, ow, ic, kh, kw) conv as IREE writes it."""
    n = 6
    inp = amap(n, 3, expr(n, (1, stride[0]), (4, dilation[0])), expr(n, (2, stride[1]), (5, dilation[1])))
    return kernel([P, P, P, R, R, R], [inp, amap(n, 0, 3, 4, 5)], amap(n, 0, 1, 2))


@pytest.mark.unit
@pytest.mark.parametrize("stride,dilation", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 1), (2, 2)),
                                             ((2, 2), (2, 2)), ((2, 1), (1, 2))])
def test_conv_is_sliding_window_with_stride_and_dilation(stride, dilation):
    k = conv2d(stride=stride, dilation=dilation)
    assert detect_sliding_window(k) == (True, stride[0], dilation[0])
    c = classify(k)
    assert c.kernel_class == "sliding_window"
    assert c.stride == stride and c.dilation == dilation


@pytest.mark.unit
def test_iterator_sets_of_conv_follow_alg2():
    p, r, o, w = iterator_sets(conv2d(stride=(2, 2)))
    assert p == (0,)  # oc indexes the weight directly
    assert r == (3, 4, 5)
    assert o == ("d1 * 2 + d4", "d2 * 2 + d5")
    assert w == (1, 2)  # output spatial dims only reachable through the window


@pytest.mark.unit
def test_depthwise_conv_channel_is_parallel_in_input():
    n = 5  # (oh, ow, c, kh, kw) as IREE orders a depthwise conv
    inp = amap(n, 2, expr(n, (0, 1), (3, 2)), expr(n, (1, 1), (4, 2)))
    k = kernel([P, P, P, R, R], [inp, amap(n, 2, 3, 4)], amap(n, 2, 0, 1))
    c = classify(k)
    assert c.kernel_class == "sliding_window"
    assert c.dilation == (2, 2) and c.stride == (1, 1)
    assert c.parallel_dims == (2,) and c.window_dims == (0, 1)


@pytest.mark.unit
def test_rectangular_kernel_10x4():
    k = conv2d()
    k = Kernel("k", "k", (8, 7, 5, 3, 10, 4), k.iterators, k.inputs, k.output, k.payload, 0)
    assert classify(k).kernel_class == "sliding_window"


@pytest.mark.unit
def test_pooling_with_window_operand_is_sliding():
    n = 5  # (c, oh, ow, kh, kw); the second operand only carries the window shape
    inp = amap(n, 0, expr(n, (1, 2), (3, 1)), expr(n, (2, 2), (4, 1)))
    k = kernel([P, P, P, R, R], [inp], amap(n, 0, 1, 2))
    assert classify(k).kernel_class == "sliding_window"
    assert classify(k).stride == (2, 2)


@pytest.mark.unit
def test_gemm_and_pointwise_conv_are_regular_reductions():
    gemm = kernel([P, R], [amap(2, 1), amap(2, 0, 1)], amap(2, 0))
    assert detect_sliding_window(gemm) == (False, 0, 0)
    assert classify(gemm).kernel_class == "reduction"
    pointwise = kernel([P, P, P, R], [amap(4, 3, 1, 2), amap(4, 0, 3)], amap(4, 0, 1, 2))
    assert classify(pointwise).kernel_class == "reduction"


@pytest.mark.unit
def test_strided_pointwise_conv_is_reduction_with_stride():
    n = 4
    inp = amap(n, 3, expr(n, (1, 2)), expr(n, (2, 2)))
    c = classify(kernel([P, P, P, R], [inp, amap(n, 0, 3)], amap(n, 0, 1, 2)))
    assert c.kernel_class == "reduction"
    assert c.stride == (2, 2)


@pytest.mark.unit
def test_global_pooling_is_reduction():
    k = kernel([P, R, R], [amap(3, 0, 1, 2)], amap(3, 0))
    c = classify(k)
    assert c.kernel_class == "reduction"
    assert c.parallel_dims == (0,) and c.reduction_dims == (1, 2)


@pytest.mark.unit
def test_elementwise_is_parallel():
    k = kernel([P, P, P], [amap(3, 0, 1, 2), amap(3, 0, 1, 2)], amap(3, 0, 1, 2))
    assert detect_sliding_window(k) == (False, 0, 0)
    assert classify(k).kernel_class == "parallel"


@pytest.mark.unit
def test_sum_of_two_parallel_dims_is_not_a_window():
    k = kernel([P, P, R], [amap(3, expr(3, (0, 1), (1, 1)), 2)], amap(3, 0, 1))
    assert classify(k).kernel_class == "reduction"


# ---- on models lifted through IREE --------------------------------------------------------------

EXPECTED = {
    "conv1x1": ["reduction"],
    "conv3x3_same": ["sliding_window"],
    "conv3x3_s2": ["sliding_window"],
    "conv3x3_d2": ["sliding_window"],
    "conv10x4_rect": ["sliding_window"],
    "conv_depthwise": ["sliding_window"],
    "conv_depthwise5x5_d2": ["sliding_window"],
    "conv_maxpool2": ["sliding_window", "sliding_window"],
    "conv_avgpool3_p1": ["sliding_window", "sliding_window"],
    "conv_gap": ["sliding_window", "reduction"],
    "add_conv_branches": ["sliding_window", "reduction", "parallel"],
    "conv_flatten_gemm": ["sliding_window", "reduction"],
    "conv_flatten_matmul": ["sliding_window", "reduction"],
    "dw_separable": ["sliding_window", "reduction", "sliding_window", "reduction"],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lifted_model_kinds(lifted, name):
    kinds = [classify(k).kernel_class for k in lifted(name).kernels()]
    assert kinds == EXPECTED[name]


def test_lifted_strides_and_dilations(lifted):
    (conv,) = lifted("conv5x5_s2_d2").kernels()
    c = classify(conv)
    assert (c.kernel_class, c.stride, c.dilation) == ("sliding_window", (2, 2), (2, 2))
    (rect,) = lifted("conv10x4_rect").kernels()
    assert rect.dims[-2:] == (10, 4)


@pytest.mark.unit
def test_window_axis_reads_stride_and_dilation_off_one_access():
    """The window geometry the streaming stage builds a sliding-window process from (`line_buffers.streaming`)."""
    iterators = (PARALLEL, PARALLEL, REDUCTION)  # d0 output row, d1 another output dim, d2 window row
    assert window_axis(expr(3, (0, 2), (2, 3)), 0, iterators) == WindowAxis(2, 2, 3)  # 2 * o + 3 * k
    assert window_axis(expr(3, (0, 1)), 0, iterators) == WindowAxis(None, 1, 1)  # a 1-wide window
    with pytest.raises(ValueError, match="has an offset"):
        window_axis(expr(3, (0, 1), (2, 1), constant=1), 0, iterators)
    with pytest.raises(ValueError, match="is not a sliding window"):
        window_axis(expr(3, (0, 1), (1, 1)), 0, iterators)  # reads along another parallel dim
    with pytest.raises(ValueError, match="is not a sliding window"):
        window_axis(expr(3, (0, -1), (2, 1)), 0, iterators)  # a reversed output axis
