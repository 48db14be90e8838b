"""The TFLite -> TOSA conversion as a program, run by `tflite_model` in a child process (`isolated`).

    python -m ming_py.frontends.tosa_convert MODEL.tflite OUT.mlirbc

Writes TOSA MLIR bytecode with locations (IREE keeps each op's TFLite output tensor name, which names
ming's kernels). On a conversion error: the converter's diagnostics and the error on stderr, exit 1.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import tosa_converter_for_tflite as converter

    source, target = argv
    with open(target, "wb") as out:
        try:
            converter.tflite_flatbuffer_to_tosa_mlir(source, out, converter.TosaConverterOutputFormat.Bytecode,
                                                     converter.TosaConverterDebugInfo.Enable)
        except Exception as exc:  # RuntimeError, or IndexError from a bad index the converter checked
            sys.stderr.write(f"error: {type(exc).__name__}: {str(exc).strip() or 'conversion failed'}\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
