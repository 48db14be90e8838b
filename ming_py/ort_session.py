"""The onnxruntime sessions ming compares with (and runs small float tables through): CPU, int8 products summed
exactly on every CPU."""

from __future__ import annotations

import platform
from pathlib import Path

# On x86 without VNNI, onnxruntime's u8 x s8 kernels add pairs of products with `vpmaddubsw`, which saturates
# them to int16, so a Conv or Gemm of full-range int8 weights is not the exact integer sum that VNNI, ARM, ming and
# the FPGA compute. This session option makes such products u8 x u8 on those CPUs (onnxruntime PR #12088,
# "x86/64 U8S8 Gemm Precision Fix"), and ming sets it there only: with VNNI, onnxruntime 1.30-1.32 rewrite int8
# QOperator models with it into com.microsoft kernels they have no int8 form of ("Failed to find kernel for
# com.microsoft.QGemm"). Its graph transformer fails to initialize some models (onnxruntime 1.32 on tf2onnx models
# whose weights several nodes share: "Attempt to replace the existing tensor"); those run without it, exact only on
# CPUs with VNNI or on ARM.
EXACT_PRODUCTS = ("session.x64quantprecision", "1")


def onnxruntime_session(model, options=None):
    """A CPU session of `model` (a path or serialized bytes) with `options` (a `SessionOptions`, else the
    defaults) and EXACT_PRODUCTS where the CPU needs it and onnxruntime can apply it."""
    import onnxruntime

    def session(exact: bool):
        settings = options if options is not None else onnxruntime.SessionOptions()
        if exact:
            settings.add_session_config_entry(*EXACT_PRODUCTS)
        return onnxruntime.InferenceSession(model, settings, providers=["CPUExecutionProvider"])

    if not saturates():
        return session(exact=False)
    try:
        return session(exact=True)
    except onnxruntime.capi.onnxruntime_pybind11_state.Fail as error:
        if "replace the existing tensor" not in str(error):
            raise
    if options is not None:
        options.add_session_config_entry(EXACT_PRODUCTS[0], "0")
    return session(exact=False)


def saturates() -> bool:
    """Whether onnxruntime's u8 x s8 kernels saturate pair sums on this CPU: x86 without VNNI."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return True
    return not {"avx512_vnni", "avx_vnni"} & set(flags)


def inexact(model) -> str:
    """Why onnxruntime may not sum `model`'s int8 products exactly on this CPU ("": it does): a CPU that saturates
    them, and a model EXACT_PRODUCTS cannot be applied to."""
    import onnxruntime

    if not saturates():
        return ""
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry(*EXACT_PRODUCTS)
    try:
        onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    except onnxruntime.capi.onnxruntime_pybind11_state.Fail as error:
        if "replace the existing tensor" in str(error):
            return ("onnxruntime saturates int8 pair sums on this CPU (x86 without VNNI) and cannot apply "
                    f"{EXACT_PRODUCTS[0]} to this model, so its outputs are not the exact integer result")
        raise
    return ""
