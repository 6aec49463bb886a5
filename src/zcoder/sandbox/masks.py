"""The empty files and directories bwrap leaves on the host for masks, and their removal.

To mask a protected path that does not exist (``scan.py``) bwrap creates an empty file or
directory there to mount on, in the real workspace. Once the command is over they are
removed, unless something else uses them: another sandboxed command in the same workspace
(of this or another zcoder) still needs its mount, and removing the mount point on the host
would take that mount away. So each sandboxed command holds a shared ``flock`` on the
workspace directory while it runs, and the removal happens only under an exclusive one,
taken without waiting: the last command out removes them. A mount point that is no longer
empty was written by someone outside the sandbox, and is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import trio

from zcoder.sandbox.plan import Mask

__all__ = ["LOCK_WAIT_SECONDS", "masks_held"]

LOCK_WAIT_SECONDS = 1.0
_POLL = 0.01


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


def _remove_if_empty(path: Path) -> None:
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.unlink(path)
        elif stat.S_ISDIR(st.st_mode) and not os.listdir(path):
            os.rmdir(path)
    except OSError:
        pass  # gone already, or not ours to remove


def remove_mount_points(fd: int, masks: Sequence[Mask]) -> bool:
    """Remove the masks' empty mount points if no other sandbox holds the lock; whether
    it did."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    for mask in sorted(masks, key=lambda m: len(m.path.parts), reverse=True):
        _remove_if_empty(mask.path)
    return True


@contextlib.asynccontextmanager
async def masks_held(workspace: Path, masks: Sequence[Mask]) -> AsyncIterator[None]:
    """The workspace locked for one sandboxed command; its mount points removed after."""
    try:
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield  # no lock to be had: the mount points stay (an empty file, harmless)
        return
    try:
        await _shared(fd)
        yield
    finally:  # no await here: a cancelled command cleans up all the same
        if masks:
            remove_mount_points(fd, masks)
        os.close(fd)
