"""A relayed turn's writes to instruction and control files (``policy.control_file``)."""

from __future__ import annotations

from pathlib import PurePath

import pytest

from zcoder.policy import control_file

WS, HOME = PurePath("/w/proj"), PurePath("/home/u/.config/zcoder")


def why(path: str, *more: str) -> str:
    forms = [PurePath(path), *map(PurePath, more)]
    return control_file(path, forms, workspace=WS, home=HOME)


@pytest.mark.parametrize(
    ("path", "word"),
    [
        ("AGENTS.md", "AGENTS.md chain"),
        ("sub/dir/AGENTS.md", "AGENTS.md chain"),
        (".git/config", ".git"),
        ("vendor/lib/.git/hooks/pre-commit", ".git"),
        ("x/../.git/HEAD", ".git"),
        (str(HOME / "AGENTS.md"), "AGENTS.md"),
        (str(HOME / "config.toml"), "zcoder's own configuration"),
    ],
)
def test_instruction_and_control_files_need_a_yes(path: str, word: str) -> None:
    assert word in why(path) and why(path).startswith(path)


@pytest.mark.parametrize(
    "path", ["src/app.py", "agents.md.bak", "README.md", ".gitignore", "git/x"]
)
def test_ordinary_files_do_not(path: str) -> None:
    assert why(path) == ""


def test_where_a_symlink_leads_counts() -> None:
    assert ".git" in why("notes/hook", "/w/proj/.git/hooks/pre-commit")
