"""Integer numerics contract of ming: the ONE place where rounding and saturation live.

Two concerns, kept apart:

* the frameworks' rules, what the reference runtimes compute (the golden numbers):
  ``onnxruntime_rules`` (ORT's multipliers, its requantization as an exact integer rule, its tables, the float32
  emulations of its float kernels) and ``tflite_rules`` (TFLite/TOSA fixed-point requantization);
* the hardware datapaths ming derives to compute those rules exactly in DSPs and fabric, each proved equal to its
  rule: ``datapath`` (lean requantization, shift requantization, fixed-point rescale, Add/Sub, Mul),
  ``average_datapath`` (AveragePool: the float32 window sum in integers and the level thresholds) and
  ``narrow_datapath`` (TFLite's requantization in one DSP48E2);

both written in the primitives of ``integers`` (bounds, rounding shifts, float32 fields, bisection).

Every public name of those modules is importable from here (``from ming_py import numerics; numerics.requantize``).
See ``docs/numerics.md`` for the evidence of each rule and the proofs of each datapath.

Conventions
-----------
* Tensors are numpy arrays of any shape; per-channel quantities (multipliers, zero
  points) must already be broadcast-shaped by the caller (e.g. ``m.reshape(1, C, 1, 1)``).
* "rne" = round half to even, "sat" = clamp to ``[qmin, qmax]``.
* Integer rules use int64 arithmetic only, so they translate 1:1 to C++ / HLS
  (``int64_t`` products, shifts, a count-leading-zeros, compares).
* Functions whose name starts with ``ort_`` and ends with ``_reference`` are float32
  emulations of ORT's *float* kernels.  They are bit-exact with ORT and serve as the
  golden model where the integer rule has a (measured, <= 1 LSB) residual.
"""
from __future__ import annotations

from ming_py.numerics.integers import (
    INT8_MIN, INT8_MAX, I32_MIN, I32_MAX, bit_length, round_shift_half_even, round_shift_half_up, float32_parts,
    round_to_float32, least_reaching,
)
from ming_py.numerics.onnxruntime_rules import (
    ort_dequantize_linear, ort_quantize_linear, saturate, ORT_X86_DOMAIN_OFFSET, ort_conv_multiplier,
    ort_gemm_multiplier, ort_gap_multiplier, requantize_float_reference, requantize, gap_requant,
    ort_float_add_reference, mul_multiplier, AVERAGE_BY_COLUMNS, AVERAGE_BY_ROWS, float_average_domain_offset,
    ort_average_level, rescale_table, apply_table, fma_float32, ort_qlinear_add_reference, ort_qlinear_mul_reference,
    ort_qlinear_avgpool_reference,
)
from ming_py.numerics.tflite_rules import (
    fixed_point_scale, wrap_i32, fixed_point_requantize,
)
from ming_py.numerics.datapath import (
    LEAN_SATURATING, LEAN_LIMIT_BITS, LEAN_MANTISSA_BITS, LeanRequant, lean_requant, lean_channels, lean_magnitude,
    requantize_lean, SHIFT_MAX, requantize_shift, power_of_two_shift, ShiftRequant, average_shift, FixedPoint,
    to_fixed_point, fixed_point_rescale, ADD_BOUND, AddConstants, add_constants, add_fused_requant, FloatAddConstants,
    FLOAT_ADD_QUOTIENT_BITS, float_add_constants, add_float_requant, add_requant, MUL_MULTIPLIER_RANGE, mul_parts,
    mul_requant, rescale_fixed_point, rescale,
)
from ming_py.numerics.average_datapath import (
    AVERAGE_ESTIMATE_SHIFT, AVERAGE_ESTIMATE_BITS, AVERAGE_RATIO_LIMIT, AVERAGE_OFFSET_LIMIT, WindowAverageConstants,
    window_average_terms, window_average_sum, window_average_constants, window_average_level,
)
from ming_py.numerics.narrow_datapath import (
    NARROW_OPERAND_BITS, NARROW_WIDE_OPERAND_BITS, NARROW_MULTIPLIER_BITS, NARROW_SUM_BITS, NARROW_MAX_SHIFT,
    NarrowRequant, narrow_sum_residue, requantize_narrow, narrow_fixed_point, narrow_float32, requant_thresholds,
    narrow_constants,
)

__all__ = [
    "INT8_MIN", "INT8_MAX", "I32_MIN", "I32_MAX", "bit_length", "round_shift_half_even", "round_shift_half_up",
    "float32_parts", "round_to_float32", "least_reaching", "ort_dequantize_linear", "ort_quantize_linear", "saturate",
    "ORT_X86_DOMAIN_OFFSET", "ort_conv_multiplier", "ort_gemm_multiplier", "ort_gap_multiplier",
    "requantize_float_reference", "requantize", "gap_requant", "ort_float_add_reference", "mul_multiplier",
    "AVERAGE_BY_COLUMNS", "AVERAGE_BY_ROWS", "float_average_domain_offset", "ort_average_level", "rescale_table",
    "apply_table", "fma_float32", "ort_qlinear_add_reference", "ort_qlinear_mul_reference",
    "ort_qlinear_avgpool_reference", "fixed_point_scale", "wrap_i32", "fixed_point_requantize", "LEAN_SATURATING",
    "LEAN_LIMIT_BITS", "LEAN_MANTISSA_BITS", "LeanRequant", "lean_requant", "lean_channels", "lean_magnitude",
    "requantize_lean", "SHIFT_MAX", "requantize_shift", "power_of_two_shift", "ShiftRequant", "average_shift",
    "FixedPoint", "to_fixed_point", "fixed_point_rescale", "ADD_BOUND", "AddConstants", "add_constants",
    "add_fused_requant", "FloatAddConstants", "FLOAT_ADD_QUOTIENT_BITS", "float_add_constants", "add_float_requant",
    "add_requant", "MUL_MULTIPLIER_RANGE", "mul_parts", "mul_requant", "rescale_fixed_point", "rescale",
    "AVERAGE_ESTIMATE_SHIFT", "AVERAGE_ESTIMATE_BITS", "AVERAGE_RATIO_LIMIT", "AVERAGE_OFFSET_LIMIT",
    "WindowAverageConstants", "window_average_terms", "window_average_sum", "window_average_constants",
    "window_average_level", "NARROW_OPERAND_BITS", "NARROW_WIDE_OPERAND_BITS", "NARROW_MULTIPLIER_BITS",
    "NARROW_SUM_BITS", "NARROW_MAX_SHIFT", "NarrowRequant", "narrow_sum_residue", "requantize_narrow",
    "narrow_fixed_point", "narrow_float32", "requant_thresholds", "narrow_constants",
]
