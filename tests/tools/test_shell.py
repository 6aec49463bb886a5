"""run_command: exit codes, merged capped output, confinement, timeout, group kill."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from zcoder.tools.base import ToolContext
from zcoder.tools.registry import Toolbox, core_tools

from .conftest import Call, is_live, live_members


def complete_line(path: Path) -> str | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return text if text.endswith("\n") else None


async def wait_for_file(path: Path) -> str:
    while (text := complete_line(path)) is None:  # noqa: ASYNC110 - written by a child
        await trio.sleep(0.01)
    return text


async def test_exit_code_and_merged_output(call: Call) -> None:
    result = await call("run_command", command="echo out; echo err >&2; exit 3")
    assert (result.ok, result.text, result.summary) == (True, "Exit code: 3\nout\nerr\n", "exit 3")
    assert result.output == "out\nerr\n"  # for the card's preview, without the exit line
    quiet = await call("run_command", command="true")
    assert quiet.text == "Exit code: 0\n(no output)"


async def test_stdin_is_empty_and_no_terminal(call: Call) -> None:
    result = await call("run_command", command="cat; echo after; tty || true")
    assert result.text == "Exit code: 0\nafter\nnot a tty\n"


async def test_own_session_and_group(call: Call) -> None:
    result = await call("run_command", command="ps -o pid=,pgid=,sid= -p $$")
    pid, pgid, sid = result.text.splitlines()[1].split()
    assert pid == pgid == sid
    assert int(pgid) != os.getpgid(0)


async def test_killed_by_signal(call: Call) -> None:
    result = await call("run_command", command="kill -TERM $$")
    assert result.text == "Exit code: 143 (killed by SIGTERM)\n(no output)"


async def test_cwd_confined(ws: Path, call: Call) -> None:
    (ws / "sub").mkdir()
    (ws / "file").write_text("x")
    (ws / "out").symlink_to(ws.parent / "outside")
    assert (await call("run_command", command="pwd", cwd="sub")).text == f"Exit code: 0\n{ws}/sub\n"
    cases = {
        "..": "Error: path escapes the workspace: ..",
        "out": "Error: path escapes the workspace: out",
        "/tmp": "Error: path escapes the workspace: /tmp",
        "nope": "Error: no such directory: nope",
        "file": "Error: not a directory: file",
    }
    for cwd, expected in cases.items():
        result = await call("run_command", command="touch pwned", cwd=cwd)
        assert (result.ok, result.text) == (False, expected)
    assert not (ws.parent / "outside" / "pwned").exists()


async def test_bad_commands(call: Call) -> None:
    assert (await call("run_command", command="  ")).text == "Error: command is empty"
    assert (await call("run_command", command="a\0b")).text == "Error: command contains a NUL byte"
    bad = await call("run_command", command="true", timeout_seconds=True)
    assert bad.text == (
        "Error: invalid arguments for run_command: argument 'timeout_seconds' must be an "
        "integer, got boolean true"
    )
    zero = await call("run_command", command="true", timeout_seconds=0)
    assert zero.text.endswith("argument 'timeout_seconds' must be at least 1, got 0")


async def test_output_is_capped_head_and_tail(ws: Path) -> None:
    ctx = ToolContext(workspace=ws, output_cap=1000)
    command = "echo BEGIN; head -c 300000 /dev/zero | tr '\\0' a; echo; echo END"
    result = await Toolbox(core_tools()).call("run_command", {"command": command}, ctx)
    assert len(result.text) <= 1000
    assert result.text.startswith("Exit code: 0\nBEGIN\naaaa")
    assert result.text.endswith("aaaa\nEND\n")
    assert result.text.count(" characters omitted ...]\n") == 1


async def test_timeout_returns_partial_output_and_kills_group(ws: Path, call: Call) -> None:
    command = "echo $$ > pgid.txt; echo started; sleep 30 & sleep 30"
    result = await call("run_command", command=command, timeout_seconds=1)
    assert (result.ok, result.summary) == (False, "timed out")
    assert result.text == "Error: command timed out after 1 s\nstarted\n"
    assert live_members(int((ws / "pgid.txt").read_text())) == []


async def test_background_children_do_not_outlive_the_command(ws: Path, call: Call) -> None:
    result = await call("run_command", command="sleep 30 & echo $!; echo done")
    lines = result.text.splitlines()
    assert lines[0] == "Exit code: 0" and lines[2] == "done"
    assert not is_live(int(lines[1]))


async def test_cancel_kills_the_whole_group(ws: Path, call: Call) -> None:
    command = "sleep 30 & echo $! > child.txt; echo $$ > pgid.txt; sleep 30"
    finished = False

    async def run() -> None:
        nonlocal finished
        await call("run_command", command=command)
        finished = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        pgid = int(await wait_for_file(ws / "pgid.txt"))
        child = int(await wait_for_file(ws / "child.txt"))
        assert live_members(pgid) != []
        nursery.cancel_scope.cancel()
    assert not finished
    assert live_members(pgid) == []
    assert not is_live(child)
