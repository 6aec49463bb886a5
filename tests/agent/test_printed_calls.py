"""Telling a printed tool call from an answer while it streams."""

from __future__ import annotations

import pytest

from zcoder.agent.printed_calls import may_be_printed_call


@pytest.mark.parametrize(
    "start",
    ["", "  ", "{", '{ "na', '{"name": "read_file"', "`", "```", "```json\n{", "```\n", "<tool"],
)
def test_starts_that_may_become_a_call(start: str) -> None:
    assert may_be_printed_call(start)


@pytest.mark.parametrize(
    "start", ["Hello", "{}", "{ x", '{"path": 1}', "```python", "```json\nx", "<b>", "1 {"]
)
def test_starts_that_cannot(start: str) -> None:
    assert not may_be_printed_call(start)
