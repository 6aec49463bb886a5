"""The empty files and directories bwrap leaves on the host for masks, and their removal.

To mask a protected path that does not exist (``scan.py``) bwrap creates an empty file or
directory there to mount on, in the real workspace. Once the command is over they are
removed, unless something else uses them: another sandboxed command in the same workspace
(of this or another zcoder) still needs its mount, and removing the mount point on the host
would take that mount away. So each sandboxed command holds a shared ``flock`` on the
workspace directory while it runs, and the removal happens only under an exclusive one,
taken without waiting: the last command out removes them.

The last one out did not make them all: a second command's scan sees the first one's
stand-ins as the workspace's own. So every command writes the mount points it asks for
in a record of the workspace in zcoder's home (``Confinement.records``, hidden from the
sandbox), and whoever removes, removes every recorded one. A command that finds no other
running (the exclusive lock is free) first removes what the record still holds: the
leftovers of a zcoder that was killed mid-command. Only empty ones are removed: a mount
point that is no longer empty was written by someone outside the sandbox, and stays.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

import trio

from zcoder.sandbox.plan import Mask

__all__ = ["LOCK_WAIT_SECONDS", "MountPoints", "record_of", "workspace_held"]

LOCK_WAIT_SECONDS = 1.0
_POLL = 0.01


def record_of(records: Path, workspace: Path) -> Path:
    """The record of ``workspace``'s mount points in the directory ``records``."""
    digest = hashlib.sha256(os.fsencode(workspace)).hexdigest()[:24]
    return records / f"{digest}.mounts"


async def _shared(fd: int) -> None:
    """A shared lock; given up on after a while (a stranger may hold it exclusively: then
    nobody removes mount points meanwhile, which is all the lock is for)."""
    with trio.move_on_after(LOCK_WAIT_SECONDS):
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                await trio.sleep(_POLL)


def _exclusive(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _remove_if_empty(path: Path) -> None:
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.unlink(path)
        elif stat.S_ISDIR(st.st_mode) and not os.listdir(path):
            os.rmdir(path)
    except OSError:
        pass  # gone already, or not ours to remove


class MountPoints:
    """The mount points of one workspace: recorded before a command, removed after."""

    def __init__(self, workspace: Path, record: Path | None) -> None:
        self.workspace = workspace
        self.record = record
        self.mine: list[Path] = []

    def add(self, masks: Sequence[Mask]) -> None:
        """Record the stand-ins bwrap is about to make (before it makes them)."""
        self.mine += [m.path for m in masks]
        if self.record is None or not masks:
            return
        lines = "".join(f"{m.path}\n" for m in masks if "\n" not in str(m.path))
        with contextlib.suppress(OSError):  # unrecorded, they are still removed by us
            self.record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)

    def _recorded(self) -> list[Path]:
        if self.record is None:
            return []
        try:
            text = self.record.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        paths = (Path(line) for line in text.splitlines() if line.startswith("/"))
        return [p for p in paths if self.workspace in p.parents]

    def remove(self, extra: Iterable[Path] = ()) -> None:
        """Remove every recorded mount point that is empty; forget the record. Only under
        the exclusive lock: no sandbox of this workspace is running."""
        paths = {*self._recorded(), *self.mine, *extra}
        for path in sorted(paths, key=lambda p: len(p.parts), reverse=True):
            _remove_if_empty(path)
        if self.record is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.record)


@contextlib.asynccontextmanager
async def workspace_held(workspace: Path, record: Path | None) -> AsyncIterator[MountPoints]:
    """The workspace locked for one sandboxed command: the leftovers of earlier ones
    removed first when none runs, and its mount points (``MountPoints.add``) after it
    when it is the last one out."""
    points = MountPoints(workspace, record)
    try:
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield points  # no lock to be had: the mount points stay (an empty file, harmless)
        return
    try:
        if _exclusive(fd):
            points.remove()
            fcntl.flock(fd, fcntl.LOCK_SH)  # nobody else holds it: never blocks
        else:
            await _shared(fd)
        yield points
    finally:  # no await here: a cancelled command cleans up all the same
        if _exclusive(fd):
            points.remove()
        os.close(fd)
