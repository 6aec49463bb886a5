"""Every accepted relayed message of this instance, owned by one sans-I/O state machine.

A message enters when the spool accepted it (``arrived``: the spool's ``take_news``) and
leaves when it is settled or when it left the spool on its own (``withdrawn``: its sender
withdrew it, told ``cancelled``; ``left``: it was quarantined, another claimer took it). In
between it is::

    waiting --claim--> running --finished--> settled (Settle, and the final receipt)
     |    ^               |
     |    | approve       +--never reached the model--> waiting, first again (PutBack)
     v    |
    held --deny--> settled (Remove, and ``denied``)

    waiting or held --its sender's cancel--> settled by the spool (``cancelled``)

While it runs, its turn may ask this instance's user a question (``asking``: its sender is
told ``waiting``, with what the question is about) and go on once it is answered or expired
(``answered``: ``started`` again), as often as it asks. Once one expired, the turn is
``unattended``: its later questions are not asked.

A message is *held* when the user must approve it (``policy.hold_reason`` decides, once,
when it arrives): the others keep their FIFO order around it. Besides, the machine keeps
what stops every claim for a while: *stopped* (Escape stopped a relayed turn: nothing is
claimed until ``/agents resume``) and *waiting for the model* (a relayed turn never reached
it: nothing is claimed until the model answers). Refusing new messages, *paused*, is the
relay service's (its listener answers it), not this machine's.

Each message gets a number when it arrives, never given to another message in this process;
the hold notice, ``/agents inbox`` and ``approve N``/``deny N`` use it, so a number read
from a listing still names the same message later (``N`` may also be the message id). A
number that no longer waits is refused, never moved on to the next message.

Nothing here does I/O or knows Trio, and nothing imports the UI or the app. Every
transition returns what it causes, as typed effects (``effects.py``): ``Tell`` (a receipt
to the message's sender), ``Settle`` (a spool operation) and the notices for the user
(``Held`` ...: facts, worded by ``ui/inbound_text.py``), which the relay link performs.
Two spool operations need an answer: ``unreached`` returns a ``PutBack`` and ``deny`` a
``Remove``; the feeder does it and answers with ``put_back`` or ``removed``. Its index is
in memory, so a change costs O(1), never a read of the inbox.

Longer than 400 lines on purpose: one state machine, whose transitions must be read
together (spread over modules, the message's state would have several owners again).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from zcoder.errors import CommandError
from zcoder.relay.envelope import Enqueue
from zcoder.relay.inbound.effects import (
    Approved,
    Denied,
    Dropped,
    Effect,
    Held,
    InboxRow,
    InboxView,
    ModeSet,
    PutBack,
    Remove,
    Settle,
    Shown,
    Tell,
    WaitsForModel,
    Withdrawn,
    sender_label,
)
from zcoder.relay.inbound.policy import HoldReason, RoundTrips, hold_reason
from zcoder.relay.limits import DEFAULT_MAX_HOPS
from zcoder.relay.settings import INBOUND_MODES, InboundMode
from zcoder.relay.spool.news import Arrived, Claimed

__all__ = ["INBOX_ACTIONS", "Inbound"]

INBOX_ACTIONS = ("hold", "accept", "inbox", "show", "approve", "deny")
# Why a message is held, as its sender reads it in the ``held`` receipt (its detail).
_WHY_SENDER = {
    "hold": "it holds every relayed message",
    "unverified": "your peer credentials did not verify there",
    "hops": "{hops} relayed turns led to it (it holds from {max_hops})",
    "round_trips": "{max_hops} round trips with you since its user's last prompt",
}
_QUIT = "the receiver's user quit while it ran"
_EXITED = "the receiver exited before running it"
_WITHDRAWN = "withdrawn by its sender before it ran"


@attrs.define
class _Entry:
    sequence: int
    envelope: Enqueue
    verified: bool
    number: int
    seen: float
    reason: HoldReason  # "" while it runs in its turn


def _row(e: _Entry) -> InboxRow:
    envelope = e.envelope
    return InboxRow(
        e.number,
        bool(e.reason),
        sender_label(envelope),
        e.verified,
        e.seen,
        envelope.body,
        envelope.message_id,
    )


class Inbound:
    """The accepted messages of one instance and what may be claimed next."""

    def __init__(
        self,
        mode: InboundMode,
        *,
        clock: Callable[[], float] = time.time,
        max_hops: int = DEFAULT_MAX_HOPS,
    ) -> None:
        self.mode: InboundMode = mode
        self._clock = clock
        self._max_hops = max_hops
        self._round_trips = RoundTrips()
        self._answered = False  # the running turn sent back to its sender (one round trip)
        self._asking = False  # the running turn waits for this instance's user (a question)
        self._unattended = False  # a question of the running turn expired: nobody is there
        self._waiting: dict[str, _Entry] = {}  # waiting and held, in sequence order
        self._held = 0
        self._numbers: dict[str, int] = {}  # every id ever known, with its number
        self._running: tuple[_Entry, Claimed] | None = None
        self._stopped = False
        self._model_down = False
        self._stale = False  # a claim found nothing: none is tried until something changes

    # -- what arrives ---------------------------------------------------------------------

    def arrived(self, arrival: Arrived) -> list[Effect]:
        """A message the spool accepted: waiting, or held (told to its sender and the user)."""
        envelope = arrival.envelope
        reason = hold_reason(
            self.mode,
            verified=arrival.verified,
            hops=envelope.hops,
            round_trips=self._round_trips.count(envelope.sender_instance_id),
            max_hops=self._max_hops,
        )
        entry = self._enter(arrival.sequence, envelope, arrival.verified, reason)
        return self._hold_effects(entry) if reason else []

    def left(self, message_id: str) -> None:
        """A waiting message left the spool without a claim of ours."""
        self._take(message_id)
        self._stale = False

    def withdrawn(self, message_id: str) -> list[Effect]:
        """Its sender withdrew a waiting message (the spool settled it): forgotten, told
        ``cancelled`` and shown; nothing when it was not waiting here."""
        entry = self._take(message_id)
        self._stale = False
        if entry is None:
            return []
        label = sender_label(entry.envelope)
        return [
            Tell(entry.envelope, "cancelled", _WITHDRAWN),
            Withdrawn(entry.number, message_id, label),
        ]

    def changed(self) -> None:
        """The relay changed: a claim that found nothing may be tried again."""
        self._stale = False

    # -- the worker's questions -----------------------------------------------------------

    def runnable(self) -> bool:
        """A waiting message may be claimed now (none runs, none is stopped or waits for
        the model, and one is not held)."""
        return (
            self._running is None
            and not self._stopped
            and not self._model_down
            and not self._stale
            and len(self._waiting) > self._held
        )

    def waiting(self) -> int:
        """Accepted messages not running (held ones included)."""
        return len(self._waiting)

    def held(self) -> int:
        return self._held

    @property
    def running(self) -> Claimed | None:
        return self._running[1] if self._running is not None else None

    @property
    def stopped(self) -> bool:
        return self._stopped

    def waits_for_model(self) -> bool:
        return self._model_down and bool(self._waiting)

    def skip(self) -> frozenset[str]:
        """What a claim skips: the held messages."""
        return frozenset(mid for mid, e in self._waiting.items() if e.reason)

    def unrun(self) -> list[Enqueue]:
        """The accepted messages that have not run (not the running one), oldest first."""
        return [e.envelope for e in self._waiting.values()]

    # -- a relayed turn -------------------------------------------------------------------

    def claimed(self, claimed: Claimed | None) -> None:
        """The spool's answer to a claim: the message now runs (one the machine did not
        know, planted in the spool, is taken in); ``None``: nothing until a change."""
        if claimed is None:
            self._stale = True
            return
        envelope = claimed.envelope
        entry = self._take(envelope.message_id)
        if entry is None:
            entry = self._new_entry(claimed.sequence, envelope, claimed.verified, "")
        self._running = (entry, claimed)
        self._answered = False
        self._asking = False
        self._unattended = False

    def reached(self) -> list[Effect]:
        """The running message's turn reached the model: it has started."""
        self._model_down = False
        return [Tell(self._current()[0].envelope, "started")]

    def asking(self, reason: str) -> list[Effect]:
        """The running turn asks this instance's user (a question): its sender is told
        ``waiting``, with ``reason``, once until the turn goes on."""
        if self._running is None or self._asking:
            return []
        self._asking = True
        return [Tell(self._running[0].envelope, "waiting", reason)]

    def answered(self, detail: str, *, expired: bool = False) -> list[Effect]:
        """The question was answered, or ``expired``: the turn goes on, and its sender is
        told ``started`` again, with ``detail``. Nothing when no question was asked (a turn
        stopped while it asked is told its final state instead). After an expiry the
        running turn is *unattended* until it ends."""
        if self._running is None or not self._asking:
            return []
        self._asking = False
        self._unattended = self._unattended or expired
        return [Tell(self._running[0].envelope, "started", detail)]

    @property
    def unattended(self) -> bool:
        """A question of the running relayed turn expired: nobody answers here, so its
        later questions are not asked (the queue waits for one timeout, not one each)."""
        return self._running is not None and self._unattended

    def finished(self, state: str, detail: str = "", changed: str = "") -> list[Effect]:
        """The running message's turn ended after it reached the model (whatever the
        outcome): settled, and its final state told."""
        entry, claimed = self._current()
        self._running = None
        return [Settle(claimed), Tell(entry.envelope, state, detail, changed)]

    def abandoned(self) -> list[Effect]:
        """The running message's turn ended by an error of ours or a cancel of the whole
        app: settled, never run twice."""
        _, claimed = self._current()
        self._running = None
        return [Settle(claimed)]

    def unreached(self) -> PutBack:
        """The running message's turn never reached the model: nothing of it ran, it goes
        back first in the queue: the spool operation, whose performer answers with
        ``put_back``."""
        return PutBack(self._current()[1])

    def put_back(self, problem: str = "") -> list[Effect]:
        """The spool put the message back (``""``): it waits, first, for the model; or it
        could not (``problem``): settled as if run, and dropped."""
        entry, claimed = self._current()
        self._running = None
        if problem:
            return [
                Settle(claimed),
                Tell(entry.envelope, "dropped", f"it could not be put back: {problem}"),
                Dropped(problem),
            ]
        self._insert(entry)
        self._model_down = True
        return [WaitsForModel(sender_label(entry.envelope))]

    def farewell(self) -> list[Effect]:
        """The app is leaving: the running message is stopped (``cancelled``: it started)
        and the waiting ones are dropped, each told to its sender."""
        told: list[Effect] = []
        if self._running is not None:
            told.append(Tell(self._running[0].envelope, "cancelled", _QUIT))
        told += [Tell(e.envelope, "dropped", _EXITED) for e in self._waiting.values()]
        return told

    def model_answered(self) -> None:
        self._model_down = False

    # -- the user -------------------------------------------------------------------------

    def local_turn(self) -> None:
        """The user is in the loop again: the round-trip counts start over."""
        self._round_trips.local_turn()

    def sent_to(self, peer: str) -> None:
        """A receiver accepted a message of ours: when it is the sender of the relayed
        message running now, a round trip with it (one per turn)."""
        if self._running is None or self._answered:
            return
        if self._running[0].envelope.sender_instance_id == peer:  # a reply: a round trip
            self._answered = True
            self._round_trips.add(peer)

    def stop(self) -> int:
        """Escape stopped a relayed turn: when messages wait, none is claimed until
        ``go_on``; how many wait (0: nothing was stopped)."""
        self._stopped = bool(self._waiting)
        return len(self._waiting)

    def go_on(self) -> bool:
        """``/agents resume`` after ``stop``: whether relayed work was stopped."""
        was, self._stopped = self._stopped, False
        return was

    def set_mode(self, mode: str) -> tuple[ModeSet, list[Effect]]:
        """``hold``: every message not yet started waits for the user, from now on;
        ``accept``: new messages run in their turn (the held ones still wait)."""
        if mode not in INBOUND_MODES:
            raise CommandError(f"unknown inbound policy {mode!r}: use hold or accept")
        self.mode = "hold" if mode == "hold" else "accept"
        effects: list[Effect] = []
        if self.mode == "hold":
            for entry in self._waiting.values():
                if not entry.reason:
                    entry.reason = "hold"
                    self._held += 1
                    effects.append(Tell(entry.envelope, "held", _WHY_SENDER["hold"]))
        return ModeSet(self.mode, self._held, len(self._waiting)), effects

    def inbox(self) -> InboxView:
        """``/agents inbox``: the waiting messages, oldest first; the policy, and whether
        relayed work is stopped (Escape stopped it, as the status bar says)."""
        rows = tuple(_row(e) for e in self._waiting.values())
        return InboxView(self.mode, self._stopped, rows, self._clock())

    def show(self, arg: str) -> Shown:
        """``/agents show N``: message ``arg`` (number or id), held or queued, whole."""
        return Shown(_row(self._pick(arg, "show")), self._clock())

    def approve(self, arg: str) -> Approved:
        """Let message ``arg`` (its number, or its id) run in its turn; its sender's
        round-trip count starts again (the user looked at the exchange)."""
        entry = self._pick(arg, "approve")
        if not entry.reason:
            return Approved(_row(entry), was_held=False)
        entry.reason = ""
        self._held -= 1
        self._stale = False
        self._round_trips.reset(entry.envelope.sender_instance_id)
        return Approved(_row(entry), was_held=True)

    def deny(self, arg: str) -> Remove:
        """The spool operation that removes message ``arg`` (number or id); the performer
        answers with ``removed``."""
        return Remove(self._pick(arg, "deny").envelope.message_id)

    def removed(self, message_id: str) -> tuple[Denied, list[Effect]]:
        """A denied message was removed from the spool: forgotten, and told ``denied``."""
        entry = self._take(message_id)
        if entry is None:
            raise CommandError(f"relayed message {message_id} no longer waits")
        return Denied(entry.number, sender_label(entry.envelope)), [Tell(entry.envelope, "denied")]

    def number(self, message_id: str) -> int | None:
        return self._numbers.get(message_id)

    # -- internals ------------------------------------------------------------------------

    def _current(self) -> tuple[_Entry, Claimed]:
        if self._running is None:
            raise RuntimeError("no relayed message is running")
        return self._running

    def _new_entry(
        self, sequence: int, envelope: Enqueue, verified: bool, reason: HoldReason
    ) -> _Entry:
        mid = envelope.message_id
        number = self._numbers.setdefault(mid, len(self._numbers) + 1)
        return _Entry(sequence, envelope, verified, number, self._clock(), reason)

    def _enter(
        self, sequence: int, envelope: Enqueue, verified: bool, reason: HoldReason
    ) -> _Entry:
        entry = self._new_entry(sequence, envelope, verified, reason)
        self._insert(entry)
        self._stale = False
        return entry

    def _insert(self, entry: _Entry) -> None:
        """Into the waiting messages in sequence order: at the end (O(1)) for a new one,
        in its place for one put back."""
        last = next(reversed(self._waiting.values()), None)
        self._waiting[entry.envelope.message_id] = entry
        if last is not None and entry.sequence < last.sequence:
            items = sorted(self._waiting.values(), key=lambda e: e.sequence)
            self._waiting = {e.envelope.message_id: e for e in items}
        if entry.reason:
            self._held += 1

    def _take(self, message_id: str) -> _Entry | None:
        entry = self._waiting.pop(message_id, None)
        if entry is not None and entry.reason:
            self._held -= 1
        return entry

    def _hold_effects(self, entry: _Entry) -> list[Effect]:
        hops, reason = entry.envelope.hops, entry.reason
        why = _WHY_SENDER[reason].format(hops=hops, max_hops=self._max_hops)
        label = sender_label(entry.envelope)
        return [
            Tell(entry.envelope, "held", why),
            Held(entry.number, label, reason, hops, self._max_hops),
        ]

    def _pick(self, arg: str, verb: str) -> _Entry:
        """The waiting message numbered (or with the id) ``arg``; ``CommandError`` when it
        no longer waits or was never one."""
        digits = arg.isascii() and arg.isdigit()  # not "²", which int() refuses
        entry = self._waiting.get(arg)
        if entry is None and digits:
            entry = next((e for e in self._waiting.values() if e.number == int(arg)), None)
        if entry is not None:
            return entry
        number = self._numbers.get(arg)
        if number is None and digits and 1 <= int(arg) <= len(self._numbers):
            number = int(arg)
        if number is not None:
            raise CommandError(
                f"relayed message {number} no longer waits (it ran, or was removed): "
                "/agents inbox lists those that do"
            )
        numbers = ", ".join(str(e.number) for e in self._waiting.values())
        which = f"waiting: {numbers}" if numbers else "none waits"
        raise CommandError(
            f"/agents {verb} N: N is a number from /agents inbox or a message id ({which})"
        )
