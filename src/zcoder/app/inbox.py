"""The inbound policy as the app applies it: which accepted relayed messages wait for the
local user, and ``/agents hold|accept|inbox|approve N|deny N``.

The spool stays the one truth about what is stored; this object only marks, in memory,
which of the waiting messages are *held* (``schedule.hold_reason`` decides, once, when a
message is first seen waiting). A held message is never claimed (``skip``): the others
keep their FIFO order around it, and an approved one runs in its turn, in its place. A
denied one is settled without running (``RelayLink.discard``), so at-most-once holds: a
retry of it is a duplicate. Held and denied messages are reported to their sender through
a ``ReceiptSink`` (a no-op until receipts are wired in).

``observe`` is called with what waits after every change of the relay (the worker's
``sync_relay``), so a held message is listed and reported as soon as it is stored.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from zcoder.app.schedule import EXCHANGE_BOUND, Exchanges, HoldReason, hold_reason
from zcoder.config import INBOUND_MODES, InboundMode
from zcoder.errors import CommandError
from zcoder.relay.envelope import Limits
from zcoder.relay.spool import Spool
from zcoder.relay.spool_entry import ENTRY_NAME_RE, InvalidEntry, read_entry
from zcoder.ui.slash import age
from zcoder.ui.text import one_line, shorten
from zcoder.visible import escape_controls

__all__ = ["INBOX_ACTIONS", "Inbox", "NoReceipts", "ReceiptSink", "Waiting", "read_waiting"]

INBOX_ACTIONS = ("hold", "accept", "inbox", "approve", "deny")
_WHY = {
    "hold": "this instance holds relayed messages",
    "unverified": "its sender's peer credentials did not verify",
    "bound": f"{EXCHANGE_BOUND} relayed exchanges with its sender since your last prompt",
}


class ReceiptSink(Protocol):
    """Reports a message's state to its sender (``held``, ``denied``): best effort, never
    raises, never waits."""

    def report(self, message_id: str, state: str, detail: str) -> None: ...


class NoReceipts:
    """Sends nothing: version 1 has no receipts."""

    def report(self, message_id: str, state: str, detail: str) -> None:
        return None


@attrs.frozen
class Waiting:
    """One accepted message not yet claimed, as the inbox lists it (raw text; escaped
    where shown)."""

    message_id: str
    sender_id: str
    sender: str
    verified: bool
    body: str


def read_waiting(spool: Spool | None, limits: Limits) -> list[Waiting]:
    """The messages in the spool's ``inbox/``, oldest first; an entry that cannot be read is
    left for the next claim to quarantine (never run, so never listed)."""
    if spool is None:
        return []
    inbox = spool.root / "inbox"
    try:
        names = sorted(os.listdir(inbox))
    except OSError:
        return []
    out = []
    for name in names:
        found = ENTRY_NAME_RE.fullmatch(name)
        if found is None:
            continue
        try:
            e, verified = read_entry(inbox / name, found.group(2), limits)
        except InvalidEntry:
            continue
        label = f"{e.sender_project} (pid {e.sender_pid})"
        out.append(Waiting(e.message_id, e.sender_instance_id, label, verified, e.body))
    return out


@attrs.define
class _Entry:
    waiting: Waiting
    seen: float
    reason: HoldReason


class Inbox:
    """The held marks and the exchange count of one instance."""

    def __init__(
        self,
        mode: InboundMode,
        receipts: ReceiptSink | None = None,
        *,
        clock: Callable[[], float] = time.time,
        bound: int = EXCHANGE_BOUND,
    ) -> None:
        self.mode: InboundMode = mode
        self.exchanges = Exchanges()
        self.receipts: ReceiptSink = receipts if receipts is not None else NoReceipts()
        self._clock = clock
        self._bound = bound
        self._entries: dict[str, _Entry] = {}  # waiting messages, oldest first

    # -- what the worker asks -------------------------------------------------------------

    def skip(self) -> frozenset[str]:
        """The held messages: never claimed until approved."""
        return frozenset(mid for mid, e in self._entries.items() if e.reason)

    def runnable(self) -> bool:
        """Whether a waiting message is not held (``observe`` has seen it)."""
        return any(not e.reason for e in self._entries.values())

    def held(self) -> int:
        return sum(1 for e in self._entries.values() if e.reason)

    def observe(self, waiting: Sequence[Waiting]) -> list[str]:
        """Take in what waits now; the notices for messages newly held (each once)."""
        now = self._clock()
        present = {w.message_id for w in waiting}
        for mid in [m for m in self._entries if m not in present]:
            del self._entries[mid]  # claimed, or removed
        notices = []
        for w in waiting:
            if w.message_id in self._entries:
                continue
            reason = hold_reason(
                self.mode,
                verified=w.verified,
                exchanges=self.exchanges.count(w.sender_id),
                bound=self._bound,
            )
            self._entries[w.message_id] = _Entry(w, now, reason)
            if reason:
                notices.append(self._hold(w, reason))
        return notices

    def _hold(self, w: Waiting, reason: HoldReason) -> str:
        self.receipts.report(w.message_id, "held", _WHY[reason])
        n = list(self._entries).index(w.message_id) + 1
        return (
            f"Relayed message {n} from {escape_controls(w.sender)} is held: {_WHY[reason]}. "
            f"/agents inbox lists it; /agents approve {n} runs it, /agents deny {n} drops it."
        )

    # -- /agents --------------------------------------------------------------------------

    def set_mode(self, mode: str) -> list[str]:
        """``hold``: every message not yet started waits for the user, from now on;
        ``accept``: new messages run in their turn (the held ones still wait)."""
        if mode not in INBOUND_MODES:
            raise CommandError(f"unknown inbound policy {mode!r}: use hold or accept")
        self.mode = "hold" if mode == "hold" else "accept"
        if self.mode == "accept":
            held = self.held()
            tail = f"; {held} held still wait for /agents approve N" if held else ""
            return [f"Relayed messages run in their turn again{tail}."]
        for e in self._entries.values():
            if not e.reason:
                e.reason = "hold"
                self.receipts.report(e.waiting.message_id, "held", _WHY["hold"])
        return [
            f"Relayed messages are held: {self.held()} waiting; "
            "/agents inbox lists them, /agents approve N runs one."
        ]

    def lines(self) -> list[str]:
        """``/agents inbox``: one line per waiting message, oldest first."""
        now = self._clock()
        if not self._entries:
            return [f"No relayed message waits (inbound policy: {self.mode})."]
        out = [f"Relayed messages waiting (inbound policy: {self.mode}):"]
        for n, e in enumerate(self._entries.values(), 1):
            w = e.waiting
            state = "held" if e.reason else "queued"
            check = "verified" if w.verified else "UNVERIFIED"
            first = shorten(one_line(w.body.strip().split("\n", 1)[0]), 60)
            out.append(
                f"{n:>3}. {state:<6} {escape_controls(w.sender)} · {check} · "
                f"{age(now - e.seen)} · {first}"
            )
        return out

    def _pick(self, arg: str, verb: str) -> _Entry:
        entries = list(self._entries.values())
        if not arg.isdigit() or not 1 <= int(arg) <= len(entries):
            which = f"1 to {len(entries)}" if entries else "none waits"
            raise CommandError(f"/agents {verb} N: N is a number from /agents inbox ({which})")
        return entries[int(arg) - 1]

    def approve(self, arg: str) -> list[str]:
        """Let message ``arg`` (its number in ``lines``) run in its turn; its sender's
        exchange count starts again (the user looked at the exchange)."""
        entry = self._pick(arg, "approve")
        if not entry.reason:
            return [f"Relayed message {arg} is not held: it runs in its turn."]
        entry.reason = ""
        self.exchanges.reset(entry.waiting.sender_id)
        return [f"Relayed message {arg} approved: it runs in its turn."]

    def deny(self, arg: str) -> Waiting:
        """The message ``arg`` to remove (the caller settles it in the spool, then calls
        ``denied``)."""
        return self._pick(arg, "deny").waiting

    def denied(self, waiting: Waiting) -> None:
        self._entries.pop(waiting.message_id, None)
        self.receipts.report(waiting.message_id, "denied", "")
