"""A number of thousands of digits in any file or option ming reads is refused in ming's words, naming where it
was written, before Python's int() meets its 4,300-digit conversion limit (whose message advises a programmer)."""

from __future__ import annotations

import pytest

from ming_py.boards import load_board
from ming_py.calibration import load_calibration
from ming_py.errors import MingError
from ming_py.ilp.budget import Budget
from ming_py.ilp.pins import parse_assignments
from ming_py.contract.ming_json import MAX_JSON_INT_DIGITS, json_document

pytestmark = pytest.mark.unit

LONG = "9" * 5000  # past Python's 4,300-digit limit


def _refused(call) -> str:
    with pytest.raises(MingError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "set_int_max_str_digits" not in message
    return message


def test_the_json_reader_refuses_a_long_whole_number_and_takes_a_long_enough_one():
    with pytest.raises(ValueError, match="a number of 5,000 digits"):
        json_document(f'{{"a": {LONG}}}')
    assert json_document(f'[{"7" * MAX_JSON_INT_DIGITS}]') == [int("7" * MAX_JSON_INT_DIGITS)]


@pytest.mark.parametrize("suffix, text", [(".json", f'{{"conv1_to_pool1.depth": {LONG}}}'),
                                          (".yaml", f"conv1_to_pool1.depth: {LONG}\n"),
                                          (".yaml", f"conv1:\n  unroll:\n    oc: 0x{LONG}\n")])
def test_a_settings_file_with_a_long_number_names_the_file(tmp_path, suffix, text):
    path = tmp_path / f"settings{suffix}"
    path.write_text(text)
    message = _refused(lambda: parse_assignments([], [path]))
    assert message.startswith(f"{path}: ") and "a number of 5,00" in message


def test_a_long_number_on_the_command_line_is_named():
    message = _refused(lambda: parse_assignments([f"conv1.unroll.oc={LONG}"]))
    assert message.startswith("--set conv1.unroll.oc: a number of 5,000 digits")


def test_a_calibration_file_with_a_long_number_names_the_file(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(f'{{"lut": {{"mac": {LONG}}}}}')
    message = _refused(lambda: load_calibration(path))
    assert message.startswith(f"{path}: ") and "a number of 5,000 digits" in message


@pytest.mark.parametrize("figure", [LONG, f"{LONG}%", f"{LONG}.5%"])
def test_a_budget_of_thousands_of_digits_is_quoted_short(figure):
    message = _refused(lambda: Budget.of(load_board("kv260"), {"dsp": figure}))
    assert "a figure of 5,000 digits" in message and len(message) < 200


def test_a_share_written_with_many_decimals_is_a_share():
    board = load_board("kv260")
    assert Budget.of(board, {"dsp": f"20.{'0' * 40}%"}) == Budget.of(board, {"dsp": "20%"})
