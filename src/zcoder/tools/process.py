"""Child processes in their own process group, and killing that whole group.

A shell command may start grandchildren (``make -j``, ``server &``); killing only the shell
would orphan them. Each child therefore leads a new session (``start_new_session=True``, so
also a new process group with id = its pid and no controlling terminal), and every exit path
signals the group: SIGTERM, a short grace, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

__all__ = ["KILL_GRACE_SECONDS", "group_alive", "kill_group", "open_group_process"]

KILL_GRACE_SECONDS = 1.0


async def open_group_process(
    argv: Sequence[str],
    cwd: Path,
    *,
    merge_stderr: bool = True,
    env: Mapping[str, str] | None = None,
) -> trio.Process:
    """Start ``argv`` with empty stdin, stdout piped (stderr merged or discarded)."""
    return await trio.lowlevel.open_process(
        list(argv),
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.DEVNULL,
        start_new_session=True,
        env=None if env is None else dict(env),
    )


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # the id now names someone else's group: ours is gone
    return True


def _proc_group_alive(pgid: int) -> bool:
    with os.scandir("/proc") as entries:  # an early return must not leak the directory
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue  # exited while we looked
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
    return False


def group_alive(pgid: int) -> bool:
    """True while a running (not zombie) process is in group ``pgid``.

    ``killpg(pgid, 0)`` also counts zombies, which linger where the init process does not
    reap orphans (some containers), so on Linux /proc decides.
    """
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return _proc_group_alive(pgid) if os.path.isdir("/proc") else True


async def _wait_group_gone(pgid: int) -> None:
    # Members that are not our children cannot be waited for: poll, first often (a
    # sandbox's processes are gone a millisecond after bwrap), then every 20 ms.
    pause = 0.001
    while group_alive(pgid):
        await trio.sleep(pause)
        pause = min(pause * 2, 0.02)


async def kill_group(process: trio.Process) -> None:
    """Terminate the process's whole group and reap the leader. Shielded and bounded."""
    pgid = process.pid
    with trio.CancelScope(shield=True):
        if _signal_group(pgid, signal.SIGTERM):
            with trio.move_on_after(KILL_GRACE_SECONDS):
                await process.wait()
                await _wait_group_gone(pgid)
        # Stragglers may ignore SIGTERM or outlive the leader: no member survives this.
        _signal_group(pgid, signal.SIGKILL)
        with trio.move_on_after(KILL_GRACE_SECONDS):
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
