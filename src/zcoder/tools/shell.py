"""The run_command tool: a shell command in the workspace, in its own process group.

stdin is empty (``/dev/null``) and there is no controlling terminal, so nothing can wait for
keyboard input. stdout and stderr are merged and capped while they are read. When the shell
exits, its background children get a short moment to finish writing; then the whole process
group is killed, as it is on timeout and on cancellation, so no process outlives the call.
Approval is not decided here: the agent loop asks before it calls this tool, and says
(``ToolContext.sandbox``) whether the command runs in the sandbox (``zcoder.sandbox``):
then the shell is started by bwrap, which is the process group's leader, and killing the
group kills bwrap, whose pid namespace takes every process of the command with it.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from zcoder.errors import ToolError
from zcoder.sandbox.masks import record_of, workspace_held
from zcoder.sandbox.plan import Confinement, Protected, bwrap_argv, sandbox_environment
from zcoder.sandbox.scan import remove_created, scan_workspace
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.output import OutputCollector
from zcoder.tools.process import kill_group, open_group_process
from zcoder.tools.workspace import existing_dir

__all__ = ["DRAIN_SECONDS", "OUTSIDE_SANDBOX", "RUN_COMMAND", "sandbox_note"]

DRAIN_SECONDS = 0.2
# The optional argument that asks to run one command outside the sandbox, and what the
# model is told of the sandbox in a turn whose commands run in it (``RoundRunner``).
OUTSIDE_SANDBOX = "outside_sandbox"


def sandbox_note(network: bool) -> str:
    """What the model is told of the sandbox, after the tool's description."""
    net = "the network is reachable" if network else "there is no network"
    return (
        " Commands run in a sandbox: the workspace is writable except .git (git can read "
        "the repository but not commit, stage or switch branches) and AGENTS.md files; "
        f"the rest of the filesystem is read-only; /tmp is private; {net}."
    )


_HEADER_ROOM = 100  # the "Exit code" / timeout line sits above the capped output


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # Nobody can answer a pager or a credential prompt: make tools print and fail instead.
    env.update(PAGER="cat", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    return env


async def _read_into(
    stream: trio.abc.ReceiveStream, sink: OutputCollector, done: trio.Event
) -> None:
    try:
        while chunk := await stream.receive_some(65536):
            sink.feed_bytes(chunk)
    finally:
        done.set()


async def _pump(process: trio.Process, sink: OutputCollector) -> None:
    """Read the output until the shell exits and its pipe is drained (or left open)."""
    assert process.stdout is not None
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_into, process.stdout, sink, done)
        await process.wait()
        # A background child may hold the pipe open for ever; it is killed with the group.
        with trio.move_on_after(DRAIN_SECONDS):
            await done.wait()
        nursery.cancel_scope.cancel()


def _exit_status(returncode: int) -> tuple[int, str]:
    """The shell convention (128 + signal for a killed process) and a note naming it."""
    if returncode < 0:
        return 128 - returncode, f" (killed by {signal.Signals(-returncode).name})"
    return returncode, ""


async def _run(
    argv: list[str], cwd: Path, limit: float, sink: OutputCollector, sandboxed: bool = False
) -> tuple[trio.Process, bool]:
    """The process, once it and its group are gone, and whether the time limit ended it."""
    env = sandbox_environment(_environment()) if sandboxed else _environment()
    try:
        process = await open_group_process(argv, cwd, env=env)
    except OSError as exc:
        raise ToolError(f"cannot start the shell: {exc.strerror}") from None
    try:
        with trio.move_on_after(limit) as scope:
            await _pump(process, sink)
    finally:
        await kill_group(process)
    return process, scope.cancelled_caught


async def _sandboxed(
    plan: Confinement, command: str, cwd: Path, limit: float, sink: OutputCollector
) -> tuple[trio.Process, bool]:
    if plan.workspace == Path("/"):
        raise ToolError("the sandbox needs a workspace other than / (all of it is writable)")
    record = record_of(plan.records, plan.workspace) if plan.records else None
    protected, started = Protected(), False
    try:
        async with workspace_held(plan.workspace, record) as points:
            # A big tree takes a moment to walk: not on the event loop.
            protected = await trio.to_thread.run_sync(scan_workspace, plan.workspace)
            points.add(protected.masks)
            argv = bwrap_argv(plan, protected, cwd, [_shell(), "-c", command])
            started = True
            return await _run(argv, cwd, limit, sink, sandboxed=True)
    finally:
        if started:
            with trio.CancelScope(shield=True):
                after = await trio.to_thread.run_sync(scan_workspace, plan.workspace)
            if removed := remove_created(protected, after):
                names = ", ".join(str(p.relative_to(plan.workspace)) for p in removed)
                note = f"\n[zcoder removed what the sandbox forbids: {names}]\n"
                sink.feed_bytes(note.encode())


async def _run_command(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    command, raw_cwd, limit = args["command"], args["cwd"], args["timeout_seconds"]
    if "\0" in command:
        raise ToolError("command contains a NUL byte")
    if not command.strip():
        raise ToolError("command is empty")
    cwd = existing_dir(ctx.workspace, raw_cwd)
    sink = OutputCollector(max(ctx.output_cap - _HEADER_ROOM, 0))
    if ctx.sandbox is not None:
        process, timed_out = await _sandboxed(ctx.sandbox, command, cwd, limit, sink)
    else:
        process, timed_out = await _run([_shell(), "-c", command], cwd, limit, sink)
    output = sink.text() or "(no output)"
    if timed_out:
        return ToolResult(
            text=f"Error: command timed out after {limit} s\n{output}",
            ok=False,
            summary="timed out",
            output=output,
        )
    returncode = process.returncode if process.returncode is not None else -signal.SIGKILL
    code, note = _exit_status(returncode)
    return ToolResult(
        text=f"Exit code: {code}{note}\n{output}", summary=f"exit {code}", output=output
    )


RUN_COMMAND = Tool(
    ToolSpec(
        name="run_command",
        description=(
            "Run a shell command (bash) in the workspace and return 'Exit code: N' followed "
            "by its combined stdout and stderr (long output keeps its start and end). There "
            "is no input and no terminal: use non-interactive flags (for example "
            "'git --no-pager', 'apt-get -y'). Processes it starts in the background are "
            "stopped when the command ends. Use it to build, test, run git and inspect the "
            "system; use the file tools to read and edit files."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "Shell command."},
                "cwd": {
                    "type": "string",
                    "minLength": 1,
                    "default": ".",
                    "description": "Directory to run in, inside the workspace.",
                },
                "timeout_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 3600,
                    "default": 120,
                    "description": "Stop the command after this many seconds.",
                },
                OUTSIDE_SANDBOX: {
                    "type": "string",
                    "description": (
                        "Only when the sandbox stops something this command must do: why it "
                        "must run outside the sandbox. The user is asked first."
                    ),
                },
            },
            "required": ["command"],
        },
    ),
    _run_command,
)
