from __future__ import annotations

import pytest

from zcoder.visible import escape_controls, is_control


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain ü 🎉 text", "plain ü 🎉 text"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("tab\there\nnext\rx", "tab\\there\\nnext\\rx"),
        ("\x00\x07\x7f\x9b", "\\x00\\x07\\x7f\\x9b"),
        ("bidi \u202eevil\u2066", "bidi \\u202eevil\\u2066"),
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("private \ue000", "private \\ue000"),
        ("lone \ud800", "lone \\ud800"),
        ("", ""),
    ],
)
def test_escape_controls(raw: str, shown: str) -> None:
    assert escape_controls(raw) == shown


def test_keep_lets_chosen_characters_through() -> None:
    assert escape_controls("tab\there\nnext\x1b", keep="\n\t") == "tab\there\nnext\\x1b"


def test_nothing_escaped_is_left_raw() -> None:
    sample = "".join(map(chr, range(0x3000))) + "\u202e\u2066\ufeff"
    assert not any(is_control(ch) for ch in escape_controls(sample))


def test_ordinary_spaces_and_marks_are_not_controls() -> None:
    assert not any(is_control(ch) for ch in " \u00a0\u0301é中")
