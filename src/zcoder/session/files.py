"""The files under the session store: atomic writes, appends and per-session locks.

Atomic write (``zcoder.atomic_write``): a private temp file beside the target, fsync,
rename, fsync of the directory; a crash mid-write leaves the previous file intact.
Append: write at a known offset, cut what follows, ``fdatasync``.

Locks: a process that has a session open holds ``fcntl.flock`` on ``<id>.lock`` (its pid
written inside, for the message another process shows). The lock dies with the process,
so it never goes stale.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from zcoder.atomic_write import write_file
from zcoder.errors import SessionError, SessionLocked

__all__ = ["SessionLocks", "append_at", "write_atomic"]


def write_atomic(directory: Path, name: str, data: bytes) -> None:
    """Replace ``directory/name`` with ``data`` in one step (mode 0600), durably: the data
    and the rename are flushed to disk. The temp file is ``.<name>.<random>.tmp``."""
    write_file(directory / name, data, sync=True, sync_dir=True)


def append_at(path: Path, offset: int, data: bytes) -> None:
    """Write ``data`` at ``offset`` of the existing file ``path``, cut whatever follows it
    (the torn line of a save that failed) and flush it to disk. A failure may leave a torn
    last line, which readers ignore."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        view, pos = memoryview(data), offset
        while view:
            n = os.pwrite(fd, view, pos)
            if n <= 0:
                raise OSError(28, "No space left on device")
            view, pos = view[n:], pos + n
        if os.fstat(fd).st_size > pos:
            os.ftruncate(fd, pos)
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _open_locked(path: Path, sid: str) -> int | None:
    """A descriptor of ``path`` holding its lock, or None when the file was replaced
    meanwhile (the caller tries again)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise SessionError(f"cannot lock session {sid}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise SessionLocked(
            f"session {sid} is open in another zcoder process (pid {holder})"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise SessionError(f"cannot lock session {sid}: {exc.strerror}") from None
    try:
        same = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        same = False
    if same:
        return fd
    os.close(fd)  # the holder released and unlinked it meanwhile: take a fresh file
    return None


class SessionLocks:
    """The session locks this process holds in one directory."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._fds: dict[str, int] = {}

    def __contains__(self, sid: object) -> bool:
        return sid in self._fds

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._fds))

    def acquire(self, sid: str) -> None:
        """Lock ``sid`` (``SessionLocked`` when another process or this one holds it)."""
        if sid in self._fds:
            raise SessionLocked(f"session {sid} is already open in this process")
        path = self._dir / f"{sid}.lock"
        fd = None
        while fd is None:
            fd = _open_locked(path, sid)
        self._fds[sid] = fd
        # The pid only makes another process's "locked" message precise; the flock is the
        # lock, so a failed write (disk full) must neither fail nor leak it.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)

    def release(self, sid: str) -> None:
        """Unlock ``sid`` (idempotent)."""
        fd = self._fds.pop(sid, None)
        if fd is None:
            return
        # Unlink while still holding the lock: a waiter that opened the old file sees, after
        # it gets the lock, that the path no longer names its inode and starts again.
        with contextlib.suppress(OSError):
            os.unlink(self._dir / f"{sid}.lock")
        os.close(fd)
