"""Plain decimal numbers only: what a setting reads is what it means."""

from __future__ import annotations

import pytest

from zcoder.text.decimal import plain_float, plain_int


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("16", 16), ("007", 7)])
def test_plain_int_reads_ascii_digits(text: str, value: int) -> None:
    assert plain_int(text) == value


@pytest.mark.parametrize("text", ["", "1_0", "+1", "-1", " 1", "1 ", "1.0", "١٦", "²", "0x10"])
def test_plain_int_refuses_what_python_would_also_read(text: str) -> None:
    assert plain_int(text) is None


@pytest.mark.parametrize(("text", "value"), [("2", 2.0), ("0.5", 0.5), (".5", 0.5)])
def test_plain_float_reads_decimals(text: str, value: float) -> None:
    assert plain_float(text) == value


@pytest.mark.parametrize(
    "text", ["", "1_0", "1e1", "+5", "-5", " 5", "5.", "nan", "inf", "1.2.3", "٣"]
)
def test_plain_float_refuses_what_python_would_also_read(text: str) -> None:
    assert plain_float(text) is None
