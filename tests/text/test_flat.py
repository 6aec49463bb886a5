"""One line out of any text: whitespace runs folded, an optional cut with an ellipsis."""

from __future__ import annotations

from zcoder.text.flat import one_line


def test_folds_every_whitespace_run_and_strips_the_ends() -> None:
    assert one_line("  a\n\nb\t c\r\n\u2028d  ") == "a b c d"


def test_cuts_only_what_is_longer_than_the_limit() -> None:
    assert one_line("abcdef", 6) == "abcdef"
    assert one_line("abc defgh", 6) == "abc..."
    assert len(one_line("x" * 500, 300)) == 300
    assert one_line("x" * 500) == "x" * 500
