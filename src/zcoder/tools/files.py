"""Careful file access for tools: bounded reads of regular files, atomic writes.

Reads open with ``O_NOFOLLOW | O_NONBLOCK`` and check the opened descriptor, so a fifo or a
symlink swapped in after confinement is refused instead of blocking or leaking. Writes go
to a temp file in the target's directory and ``os.replace`` it, keeping the file's mode: a
reader never sees half a file and a symlink at the final name is replaced, not followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from zcoder.atomic_write import commit_file, discard_file, stage_file
from zcoder.errors import ToolError, WorkspaceError

__all__ = [
    "MAX_FILE_BYTES",
    "commit_staged",
    "decode_text",
    "discard_staged",
    "is_binary",
    "open_regular",
    "read_line_range",
    "read_regular",
    "stage_write",
    "write_atomic",
]

MAX_FILE_BYTES = 16 * 1024 * 1024
_BINARY_PROBE = 8192
_TEMP_SUFFIX = ".zcoder-tmp"  # .NAME.<random>.zcoder-tmp, beside the target


def open_regular(path: Path, shown: str) -> BinaryIO:
    """The regular file ``path`` (canonical) opened for reading; ``shown`` names it in errors."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise WorkspaceError(f"no such file: {shown}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspaceError(f"not a regular file: {shown}") from None
        raise WorkspaceError(f"cannot read {shown}: {exc.strerror}") from None
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise WorkspaceError(f"not a regular file: {shown}")
    return f


def read_regular(path: Path, shown: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (canonical); ``shown`` names it in errors."""
    with open_regular(path, shown) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise ToolError(f"file too large ({size} bytes, limit {limit}): {shown}")
        return f.read(limit + 1)[:limit]


def read_line_range(
    path: Path, shown: str, first: int, last: int, max_chars: int
) -> tuple[list[str], int]:
    """Lines ``first``..``last`` (1-based; fewer once ``max_chars`` are kept) and the file's
    line count, numbered as ``split_lines`` does. Streams, so a file of any size works."""
    kept: list[str] = []
    count = 0
    with open_regular(path, shown) as f:
        if is_binary(f.read(_BINARY_PROBE)):
            raise ToolError(f"binary file: {shown}")
        f.seek(0)
        for count, raw in enumerate(_lines(f), start=1):
            if first <= count <= last and (max_chars > 0 or not kept):
                line = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
                kept.append(line)
                max_chars -= len(line) + 8  # the line number and tab in front
    return kept, count


_LINE_CAP = 1024 * 1024


def _lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each cut to its first ``_LINE_CAP`` bytes: a file that is one
    endless line must not be read into memory whole."""
    while piece := f.readline(_LINE_CAP):
        if len(piece) == _LINE_CAP and not piece.endswith(b"\n"):
            while (more := f.readline(_LINE_CAP)) and len(more) == _LINE_CAP:
                if more.endswith(b"\n"):
                    break
        yield piece


def is_binary(data: bytes) -> bool:
    """A NUL byte near the start marks a binary file (as git and grep decide)."""
    return b"\0" in data[:_BINARY_PROBE]


def decode_text(data: bytes, shown: str, *, strict: bool = False) -> str:
    """Text of a file's bytes; binary files are refused, and so is bad UTF-8 when ``strict``."""
    if is_binary(data):
        raise ToolError(f"binary file: {shown}")
    if not strict:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"file is not valid UTF-8 (byte {exc.start}), refusing to edit it: {shown}"
        ) from None


def stage_write(path: Path, data: bytes) -> Path:
    """Write ``data`` to a new temp file beside ``path``, with ``path``'s mode if it exists
    (else 0666 minus the umask, as for any new file), flushed to disk."""
    return stage_file(path, data, mode=0o666, keep_mode=True, suffix=_TEMP_SUFFIX)


def commit_staged(staged: Sequence[tuple[Path, Path]]) -> None:
    """Move each staged temp file over its target."""
    for temp, target in staged:
        commit_file(temp, target)


def discard_staged(staged: Sequence[tuple[Path, Path]]) -> None:
    for temp, _ in staged:
        discard_file(temp)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace (or create) ``path`` with ``data`` in one step; parents must exist."""
    commit_file(stage_write(path, data), path)
