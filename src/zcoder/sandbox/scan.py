"""The workspace's instruction and control files, found before each sandboxed command.

Read-only inside the sandbox (docs/safety.rst): every ``AGENTS.md``, and every git
directory whole (the workspace's ``.git``, a nested repository's, the one a ``.git`` file
points to when it lies in the workspace), as Codex's sandbox does: any writable file there
can make the user's own git run code (``hooks``, ``config``, but also ``commondir``,
``info/``, ``objects/info/alternates``), so a sandboxed command cannot commit. A ``.git``
*file* (a worktree's or a submodule's pointer) is read-only itself, so that it cannot be
pointed at a git directory the command wrote.

Every directory between the workspace and a protected path is bound onto itself
(``Protected.pinned``, writable): a mount point cannot be renamed (``EBUSY``), so the
command cannot move a protected path away with its parent and put its own in its place.

What does not exist yet is masked, so that the command cannot create it: the workspace's
own ``AGENTS.md`` (an empty read-only directory, which git does not list) and its ``.git``
when it has none (an empty read-only directory: ``git init`` fails there, git still finds
a repository above). bwrap makes an empty file or directory on the host to mount on;
``masks.py`` removes it afterwards.

A new subdirectory cannot be prepared for, so an ``AGENTS.md`` the command creates in one
is removed once it is over (``remove_created``: by its literal path, a link and not what it
points to, and only when no ``AGENTS.md`` seen before the command has its device and inode),
and the command's result says so.

The walk skips the contents of ``.git`` and of directories that hold tools' caches and
dependencies (``_SKIPPED``), and stops after ``MAX_ENTRIES`` entries: a deeper file of a
huge tree is then not protected (docs/safety.rst says so).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from zcoder.sandbox.plan import Mask, Protected

__all__ = ["MAX_ENTRIES", "remove_created", "scan_workspace"]

MAX_ENTRIES = 200_000
_SKIPPED = frozenset(
    {"node_modules", "__pycache__", ".venv", ".tox", ".nox", ".mypy_cache", ".ruff_cache"}
    | {".pytest_cache", ".cache"}
)
_INSTRUCTIONS = "AGENTS.md"


class _Found:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.readonly: dict[Path, None] = {}
        self.masks: dict[Path, Mask] = {}
        self.seen: dict[Path, tuple[int, int]] = {}

    def inside(self, path: Path) -> bool:
        return path.is_relative_to(self.workspace)

    def protect(self, path: Path, kind: str = "file") -> None:
        """``path`` read-only where it leads; masked when nothing is there yet."""
        target = Path(os.path.realpath(path))
        if not self.inside(target):
            return  # outside the workspace everything is read-only anyway
        if os.path.lexists(target):
            self.readonly[target] = None
        elif target.parent.is_dir():
            self.masks[target] = Mask(target, "dir" if kind == "dir" else "file")

    def git_dir(self, gitdir: Path) -> None:
        """All of it: its submodules' and worktrees' git directories are inside."""
        self.protect(gitdir, "dir")

    def instruction(self, path: Path) -> None:
        """An ``AGENTS.md`` read-only where it leads, and remembered as it is (``seen``)."""
        self.protect(path)
        try:
            st = os.lstat(path)
        except OSError:
            return
        self.seen[path] = (st.st_dev, st.st_ino)

    def pinned(self) -> tuple[Path, ...]:
        """The directories between the workspace and each protected path, outermost first."""
        dirs: set[Path] = set()
        for path in [*self.readonly, *self.masks]:
            dirs.update(p for p in path.parents if self.workspace in p.parents)
        # Inside a read-only directory nothing can be renamed anyway.
        ro = list(self.readonly)
        kept = (d for d in dirs if not any(d.is_relative_to(r) for r in ro))
        return tuple(sorted(kept, key=lambda p: (len(p.parts), p)))

    def dot_git(self, path: Path) -> None:
        if path.is_symlink() or path.is_file():
            self.protect(path)  # a pointer: re-aimed, it would bring its own hooks
            gitdir = _pointed(path)
            if gitdir is not None and self.inside(gitdir):
                self.git_dir(gitdir)
        elif path.is_dir():
            self.git_dir(path)


def _pointed(dot_git: Path) -> Path | None:
    """The git directory a ``.git`` file names (``gitdir: PATH``), or where a link leads."""
    if dot_git.is_symlink():
        return Path(os.path.realpath(dot_git))
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    named = Path(text.removeprefix("gitdir:").strip())
    return Path(os.path.realpath(dot_git.parent / named))


def scan_workspace(workspace: Path) -> Protected:
    """The read-only paths and the masks of one command in ``workspace`` (canonical)."""
    found = _Found(workspace)
    # A missing one is masked by an empty directory, not a file: git lists no empty
    # directory, where /dev/null showed as '?? AGENTS.md' in every 'git status'.
    found.protect(workspace / _INSTRUCTIONS, "dir")
    if not os.path.lexists(workspace / ".git"):
        found.protect(workspace / ".git", "dir")
    stack, seen = [workspace], 0
    while stack and seen < MAX_ENTRIES:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            if entry.name == _INSTRUCTIONS:
                found.instruction(Path(entry.path))
            elif entry.name == ".git":
                found.dot_git(Path(entry.path))
            elif entry.name not in _SKIPPED and entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    readonly = tuple(sorted(found.readonly))
    masks = tuple(found.masks[p] for p in sorted(found.masks))
    return Protected(readonly, masks, found.pinned(), tuple(sorted(found.seen.items())))


def remove_created(before: Protected, after: Protected) -> list[Path]:
    """Remove the ``AGENTS.md`` files ``after`` found that ``before`` did not know (the
    command made them, in a new directory); return them. By the literal path (a link is
    removed, never what it points to), and only files and links: a directory of that name
    holds no instructions. One whose device and inode ``before`` saw is the user's file,
    wherever it now is, and stays."""
    known = {path for path, _ in before.instructions} | {m.path for m in before.masks}
    ids = {ident for _, ident in before.instructions}
    removed = []
    for path, ident in after.instructions:
        if path in known or ident in ids:
            continue
        try:
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) == ident and not stat.S_ISDIR(st.st_mode):
                os.unlink(path)
                removed.append(path)
        except OSError:
            pass  # gone already
    return removed
