"""The ONNX -> IREE -> Graph lifting: what each model becomes in ming's IR."""

from __future__ import annotations

import numpy as np

from ming_py.ir import AccRequant, AddRequant, AverageRequant, Concat, Kernel, Rescale, Reshape, WindowAverage


def only_kernels(graph):
    return {k.name: k for k in graph.kernels()}


def test_conv_becomes_one_integer_kernel_with_requant_epilogue(lifted):
    graph = lifted("conv3x3_same", per_channel=True)
    (conv,) = graph.kernels()
    assert conv.name == "conv3x3" or conv.source in conv.name
    assert conv.op == "conv" and conv.init == 0
    assert graph.tensors[conv.output.tensor].dtype == "i8"
    epilogue = conv.epilogue
    assert isinstance(epilogue, AccRequant)
    out_channels = graph.tensors[conv.output.tensor].shape[0]
    assert epilogue.bias.shape == (out_channels,) and epilogue.w_scale.shape == (out_channels,)
    assert len(set(epilogue.w_scale.tolist())) > 1  # per-channel scales survive
    # padding belongs to the consumer's window: no padded tensor exists
    activation = conv.inputs[0]
    assert activation.padding == ((0, 0), (1, 1), (1, 1))
    assert activation.pad_value == graph.inputs[0].zero_point
    assert all(t.shape != (3, 10, 10) for t in graph.tensors.values())


def test_weights_are_int8_constants(lifted):
    (conv,) = lifted("conv5x5_same").kernels()
    weight = lifted("conv5x5_same").constants[conv.inputs[1].tensor]
    assert weight.dtype == np.int8 and weight.shape[-2:] == (5, 5)


def test_asymmetric_padding_is_kept_per_side(lifted):
    (conv,) = lifted("conv3x3_asym_pad").kernels()
    assert conv.inputs[0].padding == ((0, 0), (0, 2), (1, 1)) or conv.inputs[0].padding[1] != conv.inputs[0].padding[2]


def test_depthwise_conv_has_a_permuted_output_map(lifted):
    (conv,) = lifted("conv_depthwise").kernels()
    assert not conv.output.map.is_identity()
    assert len(conv.reduction_dims) == 2  # kh, kw only: no input-channel reduction


def test_pooling_kernels(lifted):
    conv, pool = lifted("conv_maxpool3_s2_p1").kernels()
    assert pool.op == "maxpool" and pool.epilogue is None and pool.init == -128
    assert pool.inputs[0].padding and pool.inputs[0].pad_value == -128
    _, avg = lifted("conv_avgpool3_p1").kernels()
    assert avg.op == "sumpool" and isinstance(avg.epilogue, WindowAverage)
    assert avg.epilogue.exclude_padding and avg.epilogue.count == 9 and avg.epilogue.constants.divisors == (4, 6, 9)
    _, gap = lifted("conv_gap").kernels()
    assert isinstance(gap.epilogue, AverageRequant)


def test_add_and_concat(lifted):
    add = [k for k in lifted("add_conv_branches").kernels() if k.op == "add"]
    assert len(add) == 1 and isinstance(add[0].epilogue, AddRequant) and len(add[0].inputs) == 2
    graph = lifted("concat_branches")
    concats = [n for n in graph.nodes if isinstance(n, Concat)]
    assert len(concats) == 1 and concats[0].axis == 0
    rescales = [k for k in graph.kernels() if isinstance(k.epilogue, Rescale)]
    assert len(rescales) == 1  # only the branch whose scale differs from the output's


def test_standalone_relu_and_clip_become_clamped_rescales(lifted):
    from ming_py import numerics

    graph = lifted("relu_clip_kept")
    by_source = {k.source: k for k in graph.kernels() if isinstance(k.epilogue, Rescale)}
    relu, clip = by_source["relu"].epilogue, by_source["clip6"].epilogue
    assert relu.qmin == numerics.ort_quantize_linear(0.0, relu.y_scale, relu.zero_point)
    assert clip.qmin == numerics.ort_quantize_linear(0.0, clip.y_scale, clip.zero_point)
    assert clip.qmax == numerics.ort_quantize_linear(6.0, clip.y_scale, clip.zero_point)


def test_flatten_gemm_is_a_reshape_then_a_reduction(lifted):
    graph = lifted("conv_flatten_gemm")
    assert any(isinstance(n, Reshape) for n in graph.nodes)
    fc = only_kernels(graph)["fc"]
    assert fc.op == "gemm" and isinstance(fc.epilogue, AccRequant)


def test_softmax_is_a_host_tail(lifted):
    graph = lifted("lenet")
    (out,) = graph.outputs
    assert [op.kind for op in out.host_ops][:1] == ["softmax"]
    assert out.onnx_shape == (1, 10)
    assert all(isinstance(n, Kernel) or not hasattr(n, "host") for n in graph.nodes)


def test_every_kernel_is_traceable_to_an_onnx_node(quantized, lifted):
    import onnx

    names = {n.name for n in onnx.load(str(quantized("two_residual_stages"))).graph.node}
    for kernel in lifted("two_residual_stages").kernels():
        assert kernel.source in names


def test_lifting_is_deterministic(quantized):
    from ming_py.pipeline import lift

    a, b = lift(quantized("residual_block")), lift(quantized("residual_block"))
    assert [n.name for n in a.nodes] == [n.name for n in b.nodes]
    assert a.tensors == b.tensors
    assert a.constants.keys() == b.constants.keys()
    assert all(np.array_equal(a.constants[k], b.constants[k]) for k in a.constants)
