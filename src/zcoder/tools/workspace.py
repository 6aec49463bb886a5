"""Workspace confinement: turn a model-given path into a canonical path inside the workspace.

Every path is resolved with symlinks followed (``os.path.realpath``) and must land inside the
canonical workspace; the workspace itself counts as inside. Relative paths are taken from
the workspace root; absolute paths are accepted when they point inside. Errors name the path
exactly as the model gave it, so it can correct its call.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from zcoder.errors import WorkspaceError

__all__ = ["display", "existing_dir", "existing_file", "is_inside", "resolve", "writable_file"]


def is_inside(path: str, root: str) -> bool:
    """True when canonical ``path`` is ``root`` or below it (both canonical)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve(workspace: Path, raw: str) -> Path:
    """The canonical form of ``raw``; ``WorkspaceError`` when it leaves the workspace."""
    if "\0" in raw:
        raise WorkspaceError(f"path contains a NUL byte: {raw!r}")
    if not raw:
        raise WorkspaceError('path is empty (use "." for the workspace root)')
    root = os.path.realpath(workspace)
    real = os.path.realpath(os.path.join(root, raw))
    if not is_inside(real, root):
        raise WorkspaceError(f"path escapes the workspace: {raw}")
    return Path(real)


def display(workspace: Path, path: Path) -> str:
    """``path`` relative to the workspace, ``.`` for the root itself."""
    root = os.path.realpath(workspace)
    rel = os.path.relpath(path, root)
    return Path(rel).as_posix()


def resolved_names(workspace: Path, raws: Iterable[str]) -> list[str]:
    """The paths a file tool names, as the tools resolve them (symlinks followed), relative
    to the workspace (as git names them too); one the tools refuse is left out."""
    found: list[str] = []
    for raw in raws:
        try:
            found.append(display(workspace, resolve(workspace, raw)))
        except WorkspaceError:
            continue
    return found


def _stat(path: Path, raw: str, missing: str) -> os.stat_result:
    try:
        return path.stat()
    except FileNotFoundError:
        raise WorkspaceError(f"{missing}: {raw}") from None
    except NotADirectoryError:
        raise WorkspaceError(f"{missing} (a parent is not a directory): {raw}") from None
    except PermissionError:
        raise WorkspaceError(f"permission denied: {raw}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot use {raw}: {exc.strerror}") from None


def _refuse_dir_syntax(raw: str) -> None:
    # realpath drops a trailing "/" or "/.", which would turn "notes.txt/" (a directory, to
    # the system) into the file notes.txt: a file path may not end like a directory.
    if raw.endswith(("/", "/.", "/..")) or raw in (".", ".."):
        raise WorkspaceError(f"not a regular file: {raw}")


def existing_file(workspace: Path, raw: str) -> Path:
    """A regular file that exists inside the workspace."""
    path = resolve(workspace, raw)
    _refuse_dir_syntax(raw)
    if not stat.S_ISREG(_stat(path, raw, "no such file").st_mode):
        raise WorkspaceError(f"not a regular file: {raw}")
    return path


def existing_dir(workspace: Path, raw: str) -> Path:
    """A directory that exists inside the workspace."""
    path = resolve(workspace, raw)
    if not stat.S_ISDIR(_stat(path, raw, "no such directory").st_mode):
        raise WorkspaceError(f"not a directory: {raw}")
    return path


def writable_file(workspace: Path, raw: str) -> Path:
    """Where a write of ``raw`` lands: a regular file or a new name, never via a dangling link.

    A symlink that points at a file inside the workspace is written through (the target is
    replaced, the link kept); one that points nowhere is refused, since writing would create
    a file wherever the link happens to lead.
    """
    path = resolve(workspace, raw)
    _refuse_dir_syntax(raw)
    root = os.path.realpath(workspace)
    _refuse_dangling_links(root, raw)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except NotADirectoryError:
        raise WorkspaceError(f"a parent is not a directory: {raw}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot use {raw}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise WorkspaceError(f"not a regular file: {raw}")
    return path


def _refuse_dangling_links(root: str, raw: str) -> None:
    prefix = root if not os.path.isabs(raw) else os.sep
    for part in Path(raw).parts:
        prefix = os.path.join(prefix, part)
        if os.path.islink(prefix) and not os.path.exists(prefix):
            raise WorkspaceError(f"refusing to write through a dangling symlink: {raw}")
