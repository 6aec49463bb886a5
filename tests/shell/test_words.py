"""The lexer: operators, quotes, redirections and here-documents, as the guard reads them."""

from __future__ import annotations

from zcoder.shell.words import SimpleCommand, split_commands


def test_lexer_splits_operators_and_keeps_quotes() -> None:
    commands, subs = split_commands("a 'b;c' \"d e\" 2>/dev/null | f && g > out; h <<< s")
    assert commands == [
        SimpleCommand(("a", "b;c", "d e"), ((">", "/dev/null"),)),
        SimpleCommand(("f",), after_pipe=True),
        SimpleCommand(("g",), ((">", "out"),)),
        SimpleCommand(("h",), (), ("s",)),
    ]
    assert subs == []


def test_lexer_here_document_body_is_data_and_the_next_line_a_command() -> None:
    commands, _ = split_commands("cat <<'EOF' > f\nit's $(not run)\nEOF\nrm x")
    assert commands == [
        SimpleCommand(("cat",), ((">", "f"),), ("it's $(not run)",)),
        SimpleCommand(("rm", "x")),
    ]
