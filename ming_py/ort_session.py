"""The onnxruntime sessions ming compares with (and runs small float tables through): CPU, int8 products summed
exactly on every CPU."""

from __future__ import annotations

# On x86 without VNNI, onnxruntime's u8 x s8 kernels add pairs of products with `vpmaddubsw`, which saturates
# them to int16, so a Conv or Gemm of full-range int8 weights is not the exact integer sum that VNNI, ARM, ming and
# the FPGA compute. This session option makes such products u8 x u8 on those CPUs (onnxruntime PR #12088,
# "x86/64 U8S8 Gemm Precision Fix"); elsewhere it changes nothing.
EXACT_PRODUCTS = ("session.x64quantprecision", "1")


def onnxruntime_session(model, options=None):
    """A CPU session of `model` (a path or serialized bytes) with `options` (a `SessionOptions`, else the
    defaults) and EXACT_PRODUCTS."""
    import onnxruntime

    options = options if options is not None else onnxruntime.SessionOptions()
    options.add_session_config_entry(*EXACT_PRODUCTS)
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
