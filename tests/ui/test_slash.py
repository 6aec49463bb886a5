"""``/help``'s layout: two aligned columns with a hanging indent, at any width."""

from __future__ import annotations

import pytest
from prompt_toolkit.formatted_text import to_plain_text

from zcoder.commands import help_lines
from zcoder.ui.render import render_block
from zcoder.ui.slash import KEY_HELP, two_columns


@pytest.mark.parametrize("width", [60, 80, 160])
def test_help_is_two_aligned_columns_with_a_hanging_indent(width: int) -> None:
    rows = [*help_lines(), *KEY_HELP]
    col = max(len(key) for key, _ in rows) + 2
    drawn = to_plain_text(render_block("Commands:", two_columns(rows, width), width))
    lines = drawn.splitlines()[1:]
    assert all(len(line) <= width for line in lines)
    keys = {key for key, _ in rows}
    for line in lines:
        body = line[4:]
        if body[:col].strip():  # an entry: its text starts in the second column
            assert body[:col].rstrip() in keys and body[col] != " "
        else:  # a continuation: under the text, never back at the left edge
            assert body[:col] == " " * col and body[col] != " "
    # every word of every description is there, in order
    assert " ".join(line[4 + col :].strip() for line in lines) == " ".join(t for _, t in rows)


def test_help_stacks_its_columns_when_too_narrow_for_two() -> None:
    out = two_columns([("/send TARGET TEXT", "send TEXT to another instance")], 40)
    assert out == ["/send TARGET TEXT", "  send TEXT to another instance"]
