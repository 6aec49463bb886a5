"""A relayed turn's writes to instruction and control files (``policy.control_file``)."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from zcoder.approval.policy import (
    CommandVerdict,
    command_control_files,
    control_file,
    decide_command,
)
from zcoder.conversation import Origin

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


# -- commands of a relayed turn under --yes -------------------------------------------------


def verdict_under_yes(command: str, origin: Origin) -> CommandVerdict:
    return decide_command(
        command,
        policy="allow",
        profile="coding",
        origin=origin,
        granted=False,
        workspace=Path(str(WS)),
        home=Path(str(HOME)),
    )


@pytest.mark.parametrize(
    ("command", "word"),
    [
        ("echo 'obey alpha' >> AGENTS.md", "AGENTS.md"),
        ("cp hook .git/hooks/pre-commit", ".git"),
        ("cd sub && cat ../.git/config", ".git"),
        ("git config core.hooksPath /tmp/h", "git's configuration or hooks"),
        (f"rm {HOME}/sessions/x.json", "zcoder's own configuration"),
        ('echo x > "$ZCODER_HOME/AGENTS.md"', "AGENTS.md"),
    ],
)
def test_a_relayed_command_naming_a_control_file_asks_under_yes(command: str, word: str) -> None:
    assert word in command_control_files(command, home=HOME)
    verdict = verdict_under_yes(command, "relay")
    assert (verdict.action, verdict.choices) == ("ask", ("y", "n"))
    # A local turn under --yes runs it: the user chose --yes for their own commands.
    assert verdict_under_yes(command, "user").action == "run"


@pytest.mark.parametrize(
    "command", ["pytest -q", "git status", "git log --oneline", "echo .gitignore", "ls -la"]
)
def test_other_relayed_commands_still_run_under_yes(command: str) -> None:
    assert command_control_files(command, home=HOME) == ""
    assert verdict_under_yes(command, "relay").action == "run"
