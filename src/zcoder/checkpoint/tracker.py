"""One workspace's checkpoints: a snapshot before each turn's first change, the turn's
changes at its end, and the undo.

``Checkpoints.turn`` gives each turn its ``TurnCheckpoint``. The agent calls its
``before_change`` before every tool call that may change files (the file tools, commands,
MCP tools): the first call snapshots the workspace, the others only note the paths a file
tool names. ``finish`` at the turn's end snapshots again and keeps the turn when anything
changed (a turn that changed nothing leaves no record). ``undo`` restores what ``plan``
decides and marks the turns taken back.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs
import trio

from zcoder.checkpoint.plan import Entry, TurnView, pick_turns, plan_undo
from zcoder.checkpoint.records import (
    CREATED_REPOSITORY,
    FileChange,
    TurnRecord,
    load_records,
    prune,
    refs_of,
    save_records,
)
from zcoder.checkpoint.settings import CheckpointSettings
from zcoder.checkpoint.shadow import (
    NESTED_REPOSITORY,
    WORKSPACE_REPOSITORY,
    ShadowGit,
    Snapshot,
)
from zcoder.checkpoint.text import UndoReport, remove_command, restore_command
from zcoder.checkpoint.upkeep import upkeep
from zcoder.errors import CheckpointError

__all__ = ["Checkpoints", "TurnCheckpoint"]

_log = logging.getLogger(__name__)
_IGNORED = "ignored by .gitignore"


def workspace_scope(workspace: Path) -> str:
    return hashlib.sha256(str(workspace).encode()).hexdigest()[:32]


class Checkpoints:
    """The checkpoints of ``workspace``, kept under ``home/checkpoints/<scope>/``."""

    def __init__(self, home: Path, workspace: Path, settings: CheckpointSettings) -> None:
        self.root = home / "checkpoints" / workspace_scope(workspace)
        self.workspace = workspace
        self.settings = settings
        self._home = home
        self._shadows: dict[str, ShadowGit] = {}

    @property
    def enabled(self) -> bool:
        return self.settings.mode == "on"

    def shadow(self, session_id: str) -> ShadowGit:
        if session_id not in self._shadows:
            index = f"index-{session_id}"
            self._shadows[session_id] = ShadowGit(self.root, self.workspace, index, self._home)
        return self._shadows[session_id]

    def _file(self, session_id: str) -> Path:
        return self.root / "turns" / f"{session_id}.json"

    def records(self, session_id: str) -> list[TurnRecord]:
        """The session's turns that changed files, oldest first."""
        return load_records(self._file(session_id))

    def turn(self, session_id: str, origin: str, sender: str, prompt: str) -> TurnCheckpoint:
        return TurnCheckpoint(self, session_id, origin, sender, prompt)

    async def keep(self, session_id: str, record: TurnRecord) -> None:
        """Add a finished turn, drop those past the limits (with their refs)."""
        shadow = self.shadow(session_id)
        s = self.settings
        kept, dropped = prune(
            [*self.records(session_id), record], time.time(), s.keep_turns, s.keep_days
        )
        before, after = refs_of(session_id, record.number)
        updates: list[tuple[str, str | None]] = [(before, record.before), (after, record.after)]
        for old in dropped:
            updates += [(ref, None) for ref in refs_of(session_id, old.number)]
        await shadow.set_refs([*updates, (_pending(session_id), None)])
        save_records(self._file(session_id), kept)
        await upkeep(shadow, session_id, s.keep_days)

    async def undo(self, session_id: str, first: int | None) -> UndoReport:
        """Take back the session's last standing turn (``first`` None) or turn ``first`` and
        every later one; ``CheckpointError`` says why nothing was taken back."""
        if not self.enabled:
            raise CheckpointError("checkpoints are off (checkpoints.mode): nothing to undo")
        records = self.records(session_id)
        picked = pick_turns([r.number for r in records if r.standing], first, len(records))
        if isinstance(picked, str):
            raise CheckpointError(picked)
        turns = [r for r in records if r.number in picked]
        shadow = self.shadow(session_id)
        paths = set().union(*(t.touched for t in turns))
        now = await shadow.snapshot(self.settings.max_bytes)
        views = [
            TurnView(
                t.number,
                t.touched,
                await shadow.entries(t.before, paths),
                await shadow.entries(t.after, paths),
            )
            for t in turns
        ]
        over = f"it is larger than {self.settings.max_bytes} bytes now, so no snapshot holds it"
        plan = plan_undo(views, await shadow.entries(now.tree, paths), now.large, over)
        first_tree = {p: next(t.before for t in turns if p in t.touched) for p in paths}
        restored, removed, failed = await self._restore(shadow, plan.restore, first_tree)
        at = time.time()
        marked = [_undone(r, at) if r.number in picked else r for r in records]
        save_records(self._file(session_id), marked)
        kept = tuple(
            (k, restore_command(shadow.git_dir, self.workspace, k, first_tree[k.path]))
            for k in plan.kept
        )
        unrecorded = [c for t in turns for c in t.changes if not c.recorded]
        created = [c for c in unrecorded if c.status == "A"]
        left = tuple(
            (c.path, c.why, remove_command(self.workspace, c.path))
            for c in created
            if _exists(self.workspace / c.path)
        )
        return UndoReport(
            tuple(turns),
            tuple(restored),
            tuple(removed),
            kept,
            tuple(c for c in unrecorded if c.status != "A"),
            tuple(failed),
            left,
        )

    async def _restore(
        self, shadow: ShadowGit, restore: Mapping[str, Entry | None], trees: dict[str, str]
    ) -> tuple[list[str], list[str], list[tuple[str, str]]]:
        """Remove what the turns created first (a directory a turn made where a file was
        goes before the file comes back), then write the rest back; what was restored,
        what was removed, and what could not be removed (with why)."""
        by_tree: dict[str, list[str]] = {}
        removed: list[str] = []
        failed: list[tuple[str, str]] = []
        for path, entry in sorted(restore.items()):
            if entry is not None:
                by_tree.setdefault(trees[path], []).append(path)
                continue
            problem = await self._remove(shadow, path, trees[path])
            if problem:
                failed.append((path, problem))
            else:
                removed.append(path)
        for tree, paths in by_tree.items():
            await shadow.checkout(tree, paths)
        restored = [p for paths in by_tree.values() for p in paths]
        return sorted(restored), removed, failed

    async def _remove(self, shadow: ShadowGit, path: str, tree: str) -> str:
        """Remove a file the turns created, then the directories they made for it; why
        not (``""``: removed)."""
        try:
            (self.workspace / path).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            return exc.strerror or str(exc)
        parent = Path(path).parent
        while parent.parts:
            if await shadow.holds_directory(tree, parent.as_posix()):
                break
            try:
                (self.workspace / parent).rmdir()
            except OSError:  # not empty: something else lives there
                break
            parent = parent.parent
        return ""


def _exists(path: Path) -> bool:
    try:
        path.lstat()
    except OSError:
        return False
    return True


def _created_repositories(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """The git repositories the turn made (``git init``, ``git clone``): git never looks
    into them, so nothing in them is recorded and an undo leaves them; the turn names
    them (``lib/``, ``.git/``) so the undo can say so."""
    kinds = (NESTED_REPOSITORY, WORKSPACE_REPOSITORY)
    had = {u.path for u in before.unrecorded if u.why in kinds}
    made = sorted(u.path for u in after.unrecorded if u.why in kinds and u.path not in had)
    return [FileChange("A", path + "/", False, CREATED_REPOSITORY) for path in made]


def _pending(session_id: str) -> str:
    return f"refs/zcoder/{session_id}/pending"


def _undone(record: TurnRecord, at: float) -> TurnRecord:
    return attrs.evolve(record, undone=at)


class TurnCheckpoint:
    """One turn's checkpoint: taken lazily before its first change."""

    def __init__(
        self, owner: Checkpoints, session_id: str, origin: str, sender: str, prompt: str
    ) -> None:
        self._owner = owner
        self._session_id = session_id
        self._origin = origin
        self._sender = sender
        self._prompt = prompt
        self._started = time.time()
        self._before: Snapshot | None = None
        self._failed = False
        self._written: dict[str, None] = {}

    @property
    def taken(self) -> bool:
        """The snapshot before the turn's first change was taken (``finish`` is due)."""
        return self._before is not None

    async def before_change(self, paths: Sequence[str] = ()) -> str:
        """Called before a tool call that may change files (``paths``: what a file tool
        names, as the tools resolve it: ``tools.workspace.resolved_names``). The first call
        takes the snapshot; the problem, once, when it fails."""
        self._written.update(dict.fromkeys(self._relative(p) for p in paths if p))
        if self._before is not None or self._failed or not self._owner.enabled:
            return ""
        shadow = self._owner.shadow(self._session_id)
        try:
            self._before = await shadow.snapshot(self._owner.settings.max_bytes)
            await shadow.set_refs([(_pending(self._session_id), self._before.tree)])
        except CheckpointError as exc:
            self._failed = True
            self._before = None
            _log.warning("checkpoint failed: %s", exc)
            return f"No checkpoint for this turn: {exc}. /undo cannot take it back."
        return ""

    def _relative(self, path: str) -> str:
        workspace = self._owner.workspace
        full = os.path.normpath(workspace / path)
        return os.path.relpath(full, workspace)

    async def finish(self) -> TurnRecord | None:
        """Snapshot the workspace again and keep the turn when it changed anything;
        ``CheckpointError`` when that fails."""
        before = self._before
        if before is None:
            return None
        self._before = None
        shadow = self._owner.shadow(self._session_id)
        after = await shadow.snapshot(self._owner.settings.max_bytes)
        changes = await self._changes(shadow, before, after)
        if not changes:
            await shadow.set_refs([(_pending(self._session_id), None)])
            return None
        records = self._owner.records(self._session_id)
        record = TurnRecord(
            number=max((r.number for r in records), default=0) + 1,
            origin=self._origin,
            sender=self._sender,
            prompt=self._prompt,
            started=self._started,
            ended=time.time(),
            before=before.tree,
            after=after.tree,
            changes=tuple(changes),
        )
        await self._owner.keep(self._session_id, record)
        shadow.share_index()
        return record

    async def _changes(
        self, shadow: ShadowGit, before: Snapshot, after: Snapshot
    ) -> list[FileChange]:
        large = {**before.large, **after.large}
        why = {u.path: u.why for u in (*before.unrecorded, *after.unrecorded)}
        out: list[FileChange] = []
        for c in await shadow.diff(before.tree, after.tree):
            if c.path in large:  # held by one snapshot only: its undo would be wrong
                out.append(FileChange(c.status, c.path, False, why[c.path]))
            else:
                out.append(FileChange(c.status, c.path, True))
        seen = {c.path for c in out}
        for path in sorted(set(before.large) | set(after.large)):
            if path not in seen and before.large.get(path) != after.large.get(path):
                status = (
                    "A" if path not in before.large else "D" if path not in after.large else "M"
                )
                out.append(FileChange(status, path, False, why[path]))
                seen.add(path)
        # A file tool's write inside a repository of its own: git does not look in there.
        nested = [u.path + "/" for u in after.unrecorded if u.why == NESTED_REPOSITORY]
        for path in self._written:
            if path not in seen and any(path.startswith(n) for n in nested):
                out.append(FileChange("M", path, False, f"in {NESTED_REPOSITORY}"))
                seen.add(path)
        ignored = await self._ignored([p for p in self._written if p not in seen])
        out += [FileChange("M", p, False, _IGNORED) for p in ignored]
        seen.update(ignored)
        # What the turn added where the ignore rules look away (a build, a virtualenv).
        added = sorted(after.ignored - before.ignored - seen)
        out += [FileChange("A", p, False, _IGNORED) for p in added]
        return out + _created_repositories(before, after)

    async def _ignored(self, paths: list[str]) -> list[str]:
        """Which of the paths a file tool wrote the ignore rules leave out."""
        paths = [p for p in paths if _exists(self._owner.workspace / p)]
        if not paths:
            return []
        shadow = self._owner.shadow(self._session_id)
        stdin = b"".join(os.fsencode(p) + b"\0" for p in paths)
        raw = await shadow.git("check-ignore", "-z", "--stdin", "--no-index", stdin=stdin,
                               ok=(0, 1), literal=False)  # fmt: skip
        return [os.fsdecode(p) for p in raw.split(b"\0") if p]


async def finish_shielded(turn: TurnCheckpoint, seconds: float = 30.0) -> TurnRecord | None:
    """``finish`` even when the turn was cancelled (Escape, quit), within a bound."""
    with trio.move_on_after(seconds) as scope:
        scope.shield = True
        return await turn.finish()
    raise CheckpointError("the end-of-turn snapshot took too long")
