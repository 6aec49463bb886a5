"""What an undo restores, and what it leaves to the user (pure).

The turns being undone are the last ones of the session still standing (``pick_turns``):
``/undo`` the last, ``/rewind N`` turn N and every later one. Each turn is seen through its
two snapshots (``before`` its first change, ``after`` its end), restricted to the paths the
turns touched, and the workspace as it is now (``current``).

A path goes back to what it was before the first undone turn that touched it, only when
nothing but the undone turns changed it since: between two of them it stayed as the earlier
one left it, and now it is as the last one left it. Otherwise someone else changed it (the
user, another session, a command running on its own) and it is *kept* as it is: the undo
names it and never overwrites it. A path no undone turn touched is never looked at, so a
file that appeared meanwhile (OpenCode's ``/undo`` deleted such a file, its issue #46783)
stays. A path that is larger than the size cap now is not in ``current`` (no snapshot
holds it): it is kept too, whatever it was (absent from ``current`` is not "deleted").
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

import attrs

__all__ = ["Entry", "Kept", "State", "TurnView", "UndoPlan", "pick_turns", "plan_undo"]


@attrs.frozen
class Entry:
    """One file as a snapshot holds it: git's mode (``100644``, ``100755``, ``120000``
    for a symbolic link) and the id of its content."""

    mode: str
    oid: str


State = Mapping[str, Entry]  # a path missing from it: no such file in that snapshot


@attrs.frozen
class TurnView:
    """One turn being undone: its number, the paths it created, changed or deleted, and its
    two snapshots (restricted to the paths of interest)."""

    number: int
    touched: frozenset[str]
    before: State
    after: State


@attrs.frozen
class Kept:
    """A path an undone turn touched that changed since outside the undone turns: left as
    it is; ``turn`` is the first undone turn that touched it, ``entry`` what restoring it
    anyway would put back (``None``: remove it); ``why`` when it is not a change made
    outside the turns (``""``) but something the undo cannot compare."""

    path: str
    turn: int
    entry: Entry | None
    why: str = ""


@attrs.frozen
class UndoPlan:
    """``restore``: each path and what it goes back to (``None``: removed, the turns
    created it); ``kept``: the paths left to the user; ``unchanged``: touched paths that
    are already as they were before (a file created and deleted in the same turns)."""

    restore: Mapping[str, Entry | None]
    kept: tuple[Kept, ...]
    unchanged: tuple[str, ...] = ()


def pick_turns(standing: Sequence[int], first: int | None, kept: int) -> list[int] | str:
    """The numbers to undo among the session's ``standing`` turns (in order; ``kept``
    turns are known in all): the last one (``first`` None), or ``first`` and every later
    one; or why not, in one line."""
    if not kept:
        return "nothing to undo: no turn of this session has changed files"
    if not standing:
        return "nothing to undo: every turn of this session that changed files is taken back"
    if first is None:
        return [standing[-1]]
    if first not in standing:
        listed = ", ".join(str(n) for n in standing)
        return f"no turn {first} to take back: /rewind lists the turns still standing ({listed})"
    return [n for n in standing if n >= first]


def plan_undo(
    turns: Sequence[TurnView], current: State, large: Collection[str] = (), why_large: str = ""
) -> UndoPlan:
    """The plan for undoing ``turns`` (in order, oldest first) from the workspace as it is
    now (``current``; ``large``: the paths left out of it for their size, kept with
    ``why_large``)."""
    restore: dict[str, Entry | None] = {}
    kept: list[Kept] = []
    unchanged: list[str] = []
    for path in _touched_in_order(turns):
        first = next(i for i, t in enumerate(turns) if path in t.touched)
        target = turns[first].before.get(path)
        if path in large:
            kept.append(Kept(path, turns[first].number, target, why_large))
        elif not _untouched_since(path, turns[first:], current):
            kept.append(Kept(path, turns[first].number, target))
        elif current.get(path) == target:
            unchanged.append(path)
        else:
            restore[path] = target
    return UndoPlan(restore, tuple(kept), tuple(unchanged))


def _touched_in_order(turns: Sequence[TurnView]) -> list[str]:
    seen: dict[str, None] = {}
    for turn in turns:
        for path in sorted(turn.touched):
            seen.setdefault(path, None)
    return list(seen)


def _untouched_since(path: str, turns: Sequence[TurnView], current: State) -> bool:
    """Whether only ``turns`` changed ``path`` since the first of them began: each found it
    as the one before left it, and it is now as the last one left it."""
    for earlier, later in itertools.pairwise(turns):
        if later.before.get(path) != earlier.after.get(path):
            return False
    return current.get(path) == turns[-1].after.get(path)
