"""The inbound policy as the app applies it: which accepted relayed messages wait for the
local user, and ``/agents hold|accept|inbox|approve N|deny N``.

The spool stays the one truth about what is stored; this object only marks, in memory,
which of the waiting messages are *held* (``schedule.hold_reason`` decides, once, when a
message is first seen waiting). A held message is never claimed (``skip``): the others
keep their FIFO order around it, and an approved one runs in its turn, in its place. A
denied one is settled without running (``RelayLink.discard``), so at-most-once holds: a
retry of it is a duplicate. Held and denied messages are reported to their sender through
a ``ReceiptSink``: the app's is ``ReceiptSender`` (``app/receipts.py``, best effort).

Each message gets a number when first seen waiting, in the order seen, never given to
another message in this process (a message put back first in the queue keeps its own). The
hold notice, ``/agents inbox`` and ``approve N``/``deny N`` use it, so a number read from a
listing still names the same message after others ran or were removed; ``N`` may also be
the message id. A number (or id) that no longer waits is refused, never moved on to the next.

``observe`` is called with what waits after every change of the relay (the worker's
``sync_relay``), so a held message is listed and reported as soon as it is stored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from zcoder.app.relay_unrun import read_inbox, sender_label
from zcoder.app.schedule import EXCHANGE_BOUND, Exchanges, HoldReason, hold_reason
from zcoder.config import INBOUND_MODES, InboundMode
from zcoder.errors import CommandError
from zcoder.relay.envelope import Limits
from zcoder.relay.spool import Spool
from zcoder.text.visible import escape_controls
from zcoder.ui.slash import age
from zcoder.ui.text import one_line, shorten

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
    """Sends nothing: an ``Inbox`` built without a sink (the app passes its
    ``ReceiptSender``)."""

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
    return [
        Waiting(e.message_id, e.sender_instance_id, sender_label(e), verified, e.body)
        for e, verified in read_inbox(spool, limits)
    ]


@attrs.define
class _Entry:
    waiting: Waiting
    seen: float
    reason: HoldReason
    number: int


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
        # Every message id ever seen waiting, with its number: a few per message, so kept.
        self._numbers: dict[str, int] = {}

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
            number = self._numbers.setdefault(w.message_id, len(self._numbers) + 1)
            self._entries[w.message_id] = _Entry(w, now, reason, number)
            if reason:
                notices.append(self._hold(w, reason, number))
        return notices

    def _hold(self, w: Waiting, reason: HoldReason, n: int) -> str:
        self.receipts.report(w.message_id, "held", _WHY[reason])
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
        for e in self._entries.values():
            w = e.waiting
            state = "held" if e.reason else "queued"
            check = "verified" if w.verified else "UNVERIFIED"
            first = shorten(one_line(w.body.strip().split("\n", 1)[0]), 60)
            out.append(
                f"{e.number:>3}. {state:<6} {escape_controls(w.sender)} · {check} · "
                f"{age(now - e.seen)} · {first}"
            )
        return out

    def _pick(self, arg: str, verb: str) -> _Entry:
        """The waiting message numbered (or with the id) ``arg``; ``CommandError`` when it
        no longer waits or was never one."""
        entry = self._entries.get(arg)
        if entry is None and arg.isdigit():
            entry = next((e for e in self._entries.values() if e.number == int(arg)), None)
        if entry is not None:
            return entry
        number = self._numbers.get(arg)
        if number is None and arg.isdigit() and 1 <= int(arg) <= len(self._numbers):
            number = int(arg)
        if number is not None:
            raise CommandError(
                f"relayed message {number} no longer waits (it ran, or was removed): "
                "/agents inbox lists those that do"
            )
        numbers = ", ".join(str(e.number) for e in self._entries.values())
        which = f"waiting: {numbers}" if numbers else "none waits"
        raise CommandError(
            f"/agents {verb} N: N is a number from /agents inbox or a message id ({which})"
        )

    def approve(self, arg: str) -> list[str]:
        """Let message ``arg`` (its number in ``lines``, or its id) run in its turn; its
        sender's exchange count starts again (the user looked at the exchange)."""
        entry = self._pick(arg, "approve")
        if not entry.reason:
            return [f"Relayed message {entry.number} is not held: it runs in its turn."]
        entry.reason = ""
        self.exchanges.reset(entry.waiting.sender_id)
        return [f"Relayed message {entry.number} approved: it runs in its turn."]

    def deny(self, arg: str) -> tuple[int, Waiting]:
        """The message ``arg`` (number or id) to remove and its number (the caller settles
        it in the spool, then calls ``denied``)."""
        entry = self._pick(arg, "deny")
        return entry.number, entry.waiting

    def denied(self, number: int, waiting: Waiting) -> list[str]:
        """Forget a message the caller removed, report it ``denied``; the line to show."""
        self._entries.pop(waiting.message_id, None)
        self.receipts.report(waiting.message_id, "denied", "")
        sender = escape_controls(waiting.sender)
        return [f"Relayed message {number} from {sender} denied: removed without running."]
