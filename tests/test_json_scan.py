"""The flat scan that bounds a JSON document's nesting before the parser runs is linear in the text: a string
left open over many escaped quotes is one match to the end of the text, not a match tried again at every quote."""

from __future__ import annotations

import time

import pytest

from ming_py.contract.ming_json import json_document

# A hang guard, not a benchmark: the scan of a MiB takes a few hundredths of a second; before, tens of minutes.
SECONDS = 5.0
MIB = 1 << 20


@pytest.mark.unit
@pytest.mark.parametrize("tail", ["", "\\"], ids=["open-string", "open-string-ending-in-a-backslash"])
def test_a_mib_of_escaped_quotes_in_an_open_string_is_refused_at_once(tail):
    text = '["' + '\\"' * (MIB // 2) + tail
    start = time.perf_counter()
    with pytest.raises(ValueError, match="Unterminated string"):
        json_document(text)
    assert time.perf_counter() - start < SECONDS


@pytest.mark.unit
def test_strings_still_hide_their_brackets_and_escapes():
    assert json_document('["a\\"[{", {"b": "\\\\"}, "]]]"]') == ['a"[{', {"b": "\\"}, "]]]"]
