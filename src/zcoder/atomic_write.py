"""The one atomic file write: a fresh temp file, written whole, then renamed over the target.

A reader sees the old file or the new one, never half of one; a failure at any step (a full
disk, a signal) leaves the old file as it was and removes the temp file. The temp file is
opened ``O_EXCL | O_NOFOLLOW``, so a symlink planted at its name is refused, and the final
``rename`` replaces a symlink at the target instead of following it.

The callers differ only in what they need, given by parameters:

* ``sync``: ``fsync`` the data before the rename (sessions, tool writes). Without it a
  crash of the machine may leave an empty file; the spool and the manifest live in the
  runtime directory, which does not outlive a reboot, and skip it.
* ``sync_dir``: also ``fsync`` the directory after the rename, so the rename itself
  survives a power loss (sessions). Its failure is ignored: the data is already safe.
* ``mode`` and ``keep_mode``: the new file's permission bits (subject to the umask), or,
  with ``keep_mode``, those of the file it replaces when there is one (tool writes).
* ``temp_dir``: where the temp file goes (default: the target's directory); it must be on
  the same file system as the target.
* ``prefix``/``suffix``: the temp file's name around a random token, so that each caller
  can recognise (and ignore, or clean up) its own leftovers after a crash.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import TypedDict, Unpack

__all__ = ["Staging", "commit_file", "discard_file", "stage_file", "write_file"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def stage_file(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o600,
    keep_mode: bool = False,
    sync: bool = True,
    temp_dir: Path | None = None,
    prefix: str | None = None,
    suffix: str = ".tmp",
) -> Path:
    """Write ``data`` to a new temp file for ``path`` and return the temp file's path
    (``commit_file`` moves it over ``path``). ``prefix`` defaults to ``".<name>."``.
    ``OSError`` on failure, with no temp file left behind."""
    head = f".{path.name}." if prefix is None else prefix
    temp = (path.parent if temp_dir is None else temp_dir) / f"{head}{secrets.token_hex(8)}{suffix}"
    kept: int | None = None
    if keep_mode:
        with contextlib.suppress(FileNotFoundError):
            kept = stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)
    fd = os.open(temp, _FLAGS, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if kept is not None:
                os.fchmod(fd, kept)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        discard_file(temp)
        raise
    return temp


def commit_file(temp: Path, path: Path, *, sync_dir: bool = False) -> None:
    """Rename the staged ``temp`` over ``path`` (removing ``temp`` if that fails), then
    ``fsync`` the directory when ``sync_dir``."""
    try:
        os.replace(temp, path)
    except BaseException:
        discard_file(temp)
        raise
    if sync_dir:
        _sync_directory(path.parent)


def discard_file(temp: Path) -> None:
    """Remove a staged temp file that will not be committed; never raises ``OSError``."""
    with contextlib.suppress(OSError):
        os.unlink(temp)


class Staging(TypedDict, total=False):
    """The keyword parameters of ``stage_file``, which ``write_file`` passes on."""

    mode: int
    keep_mode: bool
    sync: bool
    temp_dir: Path | None
    prefix: str | None
    suffix: str


def write_file(
    path: Path, data: bytes, *, sync_dir: bool = False, **staging: Unpack[Staging]
) -> None:
    """Replace (or create) ``path`` with ``data`` in one step: ``stage_file`` with
    ``staging``, then ``commit_file``. ``OSError`` on failure, the old file intact."""
    commit_file(stage_file(path, data, **staging), path, sync_dir=sync_dir)


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # durability of the rename; the data is already safe
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
