"""Reading a JSON file ming did not just write (accelerator.json, host.json, report.json, a calibration or
settings file) within bounds.

Every one is read whole up to a size cap and parsed only once a flat scan has found it nested no deeper than
MAX_JSON_DEPTH, so no file can exhaust the recursive parser's stack: what a reader sees is the file's data, an
OSError (it cannot be read) or a ValueError of one line (too large, not UTF-8, too deep, not JSON), which the
reader turns into its own error naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat

import numpy as np

# JSON files ming reads (accelerator.json, host.json, report.json, a calibration or settings file) nest at most
# 6 levels; 64 is far past them and far below the depth at which Python's recursive json parser exhausts the
# interpreter's stack (about 1000), so a hostile nesting is refused by a flat scan before the parser sees it.
MAX_JSON_DEPTH = 64
# The largest JSON file read whole: accelerator.json with a model's float tables is tens of KB, report.json of a
# large design a few MB.
MAX_JSON_BYTES = 64 * 2**20
# The most digits of a whole number in a JSON file read: ming's own are at most 20 (64 bits); Python refuses to
# convert more than 4,300 with advice for programmers, so a longer one is refused here in the reader's words.
MAX_JSON_INT_DIGITS = 1000
# A string runs to its closing quote or, unterminated, to the end of the text (the parser then refuses it): every
# quote starts a match that cannot fail, so the scan is linear whatever the escapes.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_JSON_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_JSON_SCAN_CHUNK = 1 << 20  # brackets counted at once: a few MB of numpy temporaries whatever the file's size


def read_json(path, max_bytes: int = MAX_JSON_BYTES, follow_symlinks: bool = True) -> object:
    """The JSON document in the regular file `path`, read whole up to `max_bytes` (`read_regular`). OSError when it
    cannot be read; ValueError (one line) when it is no regular file, larger, not UTF-8 or not JSON
    (`json_document`)."""
    return json_document(read_regular(path, max_bytes, follow_symlinks).decode("utf-8"))


def read_regular(path, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`; opened without blocking, so a FIFO or a device is
    refused before anything is read from it. OSError when it cannot be opened; ValueError (one line) when it is no
    regular file or larger."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | \
        (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked before fdopen, which refuses a directory in its own words
        os.close(fd)
        raise ValueError("not a regular file")
    with os.fdopen(fd, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes:,} bytes")
    return data


def json_document(text: str, allow_nan: bool = True, object_pairs_hook=None) -> object:
    """`text` parsed as JSON; ValueError for a document nested deeper than MAX_JSON_DEPTH (counted by a flat
    scan of the brackets outside strings, before the recursive parser runs) and, unless `allow_nan`, for the
    constants NaN, Infinity and -Infinity."""
    brackets = np.frombuffer(_JSON_NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii"), np.uint8)
    depth = 0
    for start in range(0, len(brackets), _JSON_SCAN_CHUNK):
        chunk = brackets[start:start + _JSON_SCAN_CHUNK]
        depths = depth + np.cumsum(np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1), dtype=np.int64)
        if depths.max() > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        depth = int(depths[-1])

    def no_constant(name: str):
        raise ValueError(f"{name} is not a number JSON allows")

    return json.loads(text, object_pairs_hook=object_pairs_hook, parse_int=bounded_int,
                      **({} if allow_nan else {"parse_constant": no_constant}))


def bounded_int(digits: str) -> int:
    """A whole number of a JSON file, refused (ValueError) above MAX_JSON_INT_DIGITS digits."""
    check_digits(digits)
    return int(digits)


def check_digits(number: str) -> None:
    """ValueError for a number written with more than MAX_JSON_INT_DIGITS digits (a JSON or YAML scalar)."""
    count = sum(character.isdigit() for character in number)
    if count > MAX_JSON_INT_DIGITS:
        raise ValueError(f"a number of {count:,} digits, more than the {MAX_JSON_INT_DIGITS:,} of any value ming "
                         "reads")
