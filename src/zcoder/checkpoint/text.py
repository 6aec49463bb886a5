"""The words of checkpoints: the ``/rewind`` list, an undo's report, and the note the model
reads in its next request (pure)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from zcoder.checkpoint.plan import Kept
from zcoder.checkpoint.records import FileChange, TurnRecord
from zcoder.text.flat import one_line

__all__ = ["UndoReport", "model_note", "remove_command", "report_lines", "turn_lines", "who"]

_PROMPT_CHARS = 48
_NAMES = 6  # paths named in one line before "and N more"


@attrs.frozen
class UndoReport:
    """What an undo did: the turns taken back, the paths restored (``removed``: the turns
    had created them), the paths kept as the user has them, with the command that restores
    each anyway, the changes no snapshot held, and what the turns created that no snapshot
    held (a git repository, an ignored or large file: never removed by an undo, which
    cannot tell whether it changed since), with the command that removes it."""

    turns: tuple[TurnRecord, ...]
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[tuple[Kept, str], ...]
    unrecorded: tuple[FileChange, ...]
    failed: tuple[tuple[str, str], ...] = ()  # a created path that could not be removed
    left: tuple[tuple[str, str, str], ...] = ()  # created, not recorded: why, its removal


def who(record: TurnRecord) -> str:
    return f"relayed by {record.sender}" if record.origin == "relay" else "you"


def _clock(at: float, now: float) -> str:
    then, today = time.localtime(at), time.localtime(now)
    if then[:3] == today[:3]:
        return time.strftime("%H:%M", then)
    return time.strftime("%b %d %H:%M", then)


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_NAMES])
    more = len(paths) - _NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def _changes(record: TurnRecord) -> str:
    marks = {"A": "+", "M": "~", "D": "-"}
    paths = [marks[c.status] + c.path for c in record.changes]
    count = f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
    return f"{count}: {_names(paths)}"


def turn_lines(records: Sequence[TurnRecord], now: float) -> list[str]:
    """``/rewind``: each turn that changed files, numbered, oldest first."""
    out = []
    for r in records:
        prompt = one_line(r.prompt, _PROMPT_CHARS)
        state = "  (taken back)" if r.undone else ""
        out.append(
            f"{r.number:>3}. {_clock(r.started, now)}  {who(r)}: {prompt!r}  {_changes(r)}{state}"
        )
    return out


def _turns_phrase(turns: Sequence[TurnRecord], *, whose: bool = True) -> str:
    if len(turns) > 1:
        return f"turns {turns[0].number}-{turns[-1].number}"
    return f"turn {turns[0].number}" + (f" ({who(turns[0])})" if whose else "")


def restore_command(git_dir: Path, workspace: Path, kept: Kept, tree: str) -> str:
    """The shell command that restores a kept path anyway."""
    target = shlex.quote(str(workspace / kept.path))
    if kept.entry is None:
        return f"rm -- {target}"
    dirs = f"--git-dir={shlex.quote(str(git_dir))} --work-tree={shlex.quote(str(workspace))}"
    return f"git {dirs} restore --source={tree} -- {shlex.quote(kept.path)}"


def remove_command(workspace: Path, path: str) -> str:
    """The shell command that removes what the undo leaves: a file, or a directory
    (``lib/``; git makes its objects read-only, hence ``-f``)."""
    flags = "-rf " if path.endswith("/") else ""
    return f"rm {flags}-- {shlex.quote(str(workspace / path.rstrip('/')))}"


def report_lines(report: UndoReport) -> list[str]:
    """What ``/undo`` and ``/rewind N`` say: one line for what was restored, then one per
    path left as it is and per change that could not be restored."""
    done = []
    if report.restored:
        done.append(f"restored {_names(report.restored)}")
    if report.removed:
        done.append(f"removed {_names(report.removed)} (created by the turn)")
    what = "; ".join(done) if done else "no file needed restoring"
    lines = [f"Took back {_turns_phrase(report.turns)}: {what}."]
    for kept, command in report.kept:
        why = kept.why or f"it changed since turn {kept.turn} outside zcoder"
        lines.append(f"Kept {kept.path} as it is: {why}; to restore it anyway: {command}")
    for change in report.unrecorded:
        lines.append(f"Could not restore {change.path}: it was not recorded ({change.why}).")
    for path, why in report.failed:
        lines.append(f"Could not remove {path} (created by the turn): {why}.")
    for path, why, command in report.left:
        lines.append(f"Not taken back: {path} ({why}); remove it yourself: {command}")
    return lines


def model_note(report: UndoReport) -> str:
    """The user-side note of the next request: which files are back as they were, so the
    model does not build on work that is gone."""
    turns = _turns_phrase(report.turns, whose=False)
    parts = [f"[The user took back the file changes of {turns} with /undo."]
    if report.restored:
        parts.append(f"Restored to how they were before: {', '.join(report.restored)}.")
    if report.removed:
        parts.append(f"Removed (they did not exist before): {', '.join(report.removed)}.")
    left = [k.path for k, _ in report.kept] + [c.path for c in report.unrecorded]
    left += [path for path, _ in report.failed] + [path for path, _, _ in report.left]
    if left:
        parts.append(f"Not restored, left as they are now: {', '.join(left)}.")
    parts.append("Read a file again before relying on its content.]")
    return " ".join(parts)
