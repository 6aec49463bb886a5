"""Counts read as words: one token, 1,352 tokens."""

from __future__ import annotations

from zcoder.text.counts import counted


def test_one_is_singular_and_the_rest_plural_with_separators() -> None:
    assert counted(1, "token") == "1 token"
    assert counted(0, "token") == "0 tokens"
    assert counted(1352, "token") == "1,352 tokens"
    assert counted(2, "entry", "entries") == "2 entries"
    assert counted(1, "entry", "entries") == "1 entry"
