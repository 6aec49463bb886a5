"""The outbox: the messages this instance sent, each with the latest state its receiver
reported (sans I/O, in memory, one owner: the app's relay link).

A message enters with its ack (``accepted`` or ``duplicate``: only stored messages are
kept) and a number, rising in the order sent, which it keeps (``/agents sent`` and the
receipt entries name it ``#3``): the counter that ends its message id (``…-3``), so the
number a card shows and the id beside it never disagree. A receipt is applied only when it
is for a message id this instance sent, from the exact instance it was sent to, and only
when it moves the state forward: ``accepted`` < ``held`` < ``started`` < a final state
(``FINAL_STATES``), which nothing changes. A running turn may wait for its receiver's user
and go on, as often as it asks: ``waiting`` and ``started`` stand on the same step and each
replaces the other (the receiver sends a destination's receipts in order, one at a time).
So receipts are idempotent: a repeated ``started``, ``waiting`` or ``held`` changes
nothing, ``held`` after ``started`` cannot move it back, a late ``started`` cannot undo a
``completed`` (``apply`` returns ``None`` then: nothing to show, nothing to save); a state
this version does not know changes nothing either. A receiver whose ack did not say
``receipts`` (a version-1 peer) never reports: its messages stay ``accepted`` and say so
(``receipts`` false).

``standing`` is what a listing shows: the state, or ``gone`` for an unsettled message of a
reporting receiver that is no longer there (the caller looks, this module does no I/O).

Bounded: the oldest settled entries go first once ``limit`` is reached.

The sent list is part of the session: a send card keeps ``card_meta`` (the message id, its
receiver, how the user knows it, its first line, whether it reports), so that a resumed
session's outbox is rebuilt from its transcript (``restore``, in the order sent: the numbers
come back). Such a message was sent by an earlier run of zcoder (``earlier``): its
receiver reports to that run's instance id, so what is shown is the last state known.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from zcoder.relay.receipt_states import FINAL_STATES

__all__ = [
    "CARD_KEYS",
    "DEFAULT_LIMIT",
    "GONE",
    "WITHDRAWN",
    "Outbox",
    "Sent",
    "card_meta",
    "moves",
    "rank",
    "standing",
]

DEFAULT_LIMIT = 200
#: The detail of a message this instance withdrew (``/agents cancel``): said to its sender,
#: the user here, so "you" (never "this instance", read as the receiver).
WITHDRAWN = "you withdrew it (/agents cancel) before it ran"
#: What ``/agents sent`` shows for an unsettled message whose receiver is gone.
GONE = "gone"
_ORDER = {"accepted": 0, "held": 1, "started": 2, "waiting": 2}
_RUNNING_RANK = 2  # ``started`` and ``waiting``: either may follow the other
_FINAL_RANK = 3
_FIRST_LINE_CHARS = 160
#: What a send card's meta holds of the message it delivered (``card_meta``).
CARD_KEYS = ("message_id", "to", "peer", "first_line", "receipts", "number")


def _first_line(body: str) -> str:
    return next((line.strip() for line in body.splitlines() if line.strip()), "")


def card_meta(
    message_id: str,
    target_instance_id: str,
    target: str,
    body: str,
    *,
    receipts: bool,
    number: int | None = None,
) -> dict[str, str]:
    """The send card's record of a stored message (``CARD_KEYS``): what ``restore`` takes
    back when the session is resumed."""
    meta = {
        "message_id": message_id,
        "to": target_instance_id,
        "peer": target,
        "first_line": _first_line(body)[:_FIRST_LINE_CHARS],
        "receipts": "yes" if receipts else "no",
    }
    return meta if number is None else {**meta, "number": str(number)}


def rank(state: str) -> int:
    """A state's place in the forward order: accepted < held < started, waiting < final
    (an unknown state: 0, so it never moves a message)."""
    return _FINAL_RANK if state in FINAL_STATES or state == "withdrawn" else _ORDER.get(state, 0)


def moves(current: str, state: str) -> bool:
    """Whether a receipt of ``state`` moves a message now at ``current`` forward: a higher
    step, or the other of ``started`` and ``waiting`` (never from a final state)."""
    new, now = rank(state), rank(current)
    if now == _FINAL_RANK:
        return False
    return new > now or (new == now == _RUNNING_RANK and state != current)


@attrs.define
class Sent:
    """One sent message and what is known of it."""

    message_id: str
    target_instance_id: str
    target: str  # how the user knows the receiver: project (pid)
    first_line: str
    sent_at: float
    receipts: bool  # the receiver said it reports (its ack carried ``receipts``)
    number: int = 0  # rising in the order sent: ``#3`` in receipts and /agents sent
    state: str = "accepted"
    updated_at: float = 0.0
    detail: str = ""
    changed: str = ""
    earlier: bool = False  # restored from the session: sent by an earlier run of zcoder

    @property
    def final(self) -> bool:
        return rank(self.state) == _FINAL_RANK


def standing(sent: Sent, receiver_gone: bool) -> str:
    """What a listing shows: ``gone`` when the receiver left without a final receipt (it
    reports, and the message is not settled), else the state."""
    return GONE if receiver_gone and sent.receipts and not sent.final else sent.state


class Outbox:
    """The sent messages by id, oldest first."""

    def __init__(self, *, limit: int = DEFAULT_LIMIT, clock: Callable[[], float] = time.time):
        self._limit = limit
        self._clock = clock
        self._sent: dict[str, Sent] = {}
        self._count = 0

    @property
    def last_number(self) -> int:
        """The highest number given so far (0: none)."""
        return self._count

    def record(
        self,
        message_id: str,
        target_instance_id: str,
        target: str,
        body: str,
        *,
        receipts: bool,
        number: int = 0,
    ) -> Sent:
        """Keep a message its receiver stored, as ``number`` (0: the next one); returns its
        entry (a repeated id keeps the first entry)."""
        first = _first_line(body)
        return self._keep(message_id, target_instance_id, target, first, receipts, number=number)

    def restore(
        self,
        message_id: str,
        target_instance_id: str,
        target: str,
        first_line: str,
        *,
        receipts: bool,
        at: float,
        number: int = 0,
    ) -> Sent:
        """Take back a message a saved session's transcript says was sent (at ``at``, by an
        earlier run): it gets the number it had (``number``; 0, for a card saved without
        one: the next number, as it did then)."""
        sent = self._keep(
            message_id, target_instance_id, target, first_line, receipts, at, number=number
        )
        sent.earlier = True
        return sent

    def _keep(
        self,
        message_id: str,
        target_instance_id: str,
        target: str,
        first_line: str,
        receipts: bool,
        at: float | None = None,
        *,
        number: int = 0,
    ) -> Sent:
        if message_id in self._sent:
            return self._sent[message_id]
        now = self._clock() if at is None else at
        number = number if number > self._count else self._count + 1  # never one given
        self._count = number
        sent = Sent(message_id, target_instance_id, target, first_line, now, receipts, number)
        sent.updated_at = now
        self._sent[message_id] = sent
        self._trim()
        return sent

    def get(self, message_id: str) -> Sent | None:
        return self._sent.get(message_id)

    def numbered(self, number: int) -> Sent | None:
        """The message with that number (``None`` once trimmed, or never sent)."""
        return next((s for s in self._sent.values() if s.number == number), None)

    def entries(self) -> list[Sent]:
        return list(self._sent.values())

    def apply(
        self,
        message_id: str,
        from_instance_id: str,
        state: str,
        detail: str,
        changed: str,
        *,
        at: float | None = None,
    ) -> Sent | None:
        """Apply a receipt; the updated entry, or ``None`` when it is not for a message
        this instance sent to ``from_instance_id`` (then nothing changes). A receipt that
        does not move the state forward (``moves``: a repeat, ``held`` after ``started``,
        anything after a final state, a state not known here) changes nothing either and
        returns ``None``."""
        sent = self._sent.get(message_id)
        if sent is None or sent.target_instance_id != from_instance_id:
            return None
        if not moves(sent.state, state):
            return None
        sent.receipts = True  # it reports, whatever its ack said
        sent.state, sent.detail, sent.changed = state, detail, changed
        sent.updated_at = self._clock() if at is None else at
        return sent

    def withdrawn(self, message_id: str) -> Sent | None:
        """Mark a message its receiver removed on our cancel (its ``cancelled`` receipt may
        follow, or not: a final state either way)."""
        sent = self._sent.get(message_id)
        if sent is None or sent.final:
            return None
        sent.state, sent.updated_at = "cancelled", self._clock()
        sent.detail = WITHDRAWN
        return sent

    def _trim(self) -> None:
        while len(self._sent) > self._limit:
            settled = next((k for k, v in self._sent.items() if v.final), None)
            del self._sent[settled if settled is not None else next(iter(self._sent))]
