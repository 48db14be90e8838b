"""Reading the JSON files ming did not just write: a build's report.json and host.json, a calibration file, a
settings file (the deployed driver reads accelerator.json the same way).

Every one is read whole up to a size cap and parsed only once a flat scan has found it nested no deeper than
MAX_JSON_DEPTH, so no file can exhaust the recursive parser's stack: what a reader sees is the file's data, an
OSError (it cannot be read) or a ValueError of one line (too large, not UTF-8, too deep, not JSON), which the
reader turns into its MingError naming the file. The implementation is the deployed driver's
(`ming_py.runtime.ming_driver`), which runs on the board without ming and so cannot import this module.
"""

from __future__ import annotations

from .runtime.ming_driver import MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_JSON_INT_DIGITS, check_digits, json_document, \
    read_json, read_regular

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_JSON_INT_DIGITS", "check_digits", "json_document", "read_json",
           "read_regular"]
