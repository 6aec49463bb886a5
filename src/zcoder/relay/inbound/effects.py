"""What the inbound machine's transitions cause, as typed records.

``Tell`` (a receipt to a message's sender: its words are the receipt's, sent on the wire)
and ``Settle`` (a spool operation) are carried out by the app's relay link; ``PutBack``
and ``Remove`` are spool operations whose answer the machine needs, done by its feeder. The
notices (``Held``, ``WaitsForModel``, ``Dropped``, ``Withdrawn``) are facts for the user's
transcript; their wording is ``ui/inbound_text.py``'s. The answers to ``/agents`` commands
(``InboxView``, ``ModeSet``, ``Approved``, ``Denied``) are data too, worded there as well.
Pure: no Trio, no I/O.
"""

from __future__ import annotations

import attrs

from zcoder.relay.envelope import Enqueue
from zcoder.relay.inbound.policy import HoldReason
from zcoder.relay.settings import InboundMode
from zcoder.relay.spool.news import Claimed

__all__ = [
    "Approved",
    "Denied",
    "Dropped",
    "Effect",
    "Held",
    "InboxRow",
    "InboxView",
    "ModeSet",
    "Notice",
    "PutBack",
    "Remove",
    "Settle",
    "Shown",
    "Tell",
    "WaitsForModel",
    "Withdrawn",
    "sender_label",
]


def sender_label(envelope: Enqueue) -> str:
    """``alpha (pid 123)``: how the user knows a sender (raw; escaped where shown)."""
    return f"{envelope.sender_project} (pid {envelope.sender_pid})"


@attrs.frozen
class Tell:
    """Report ``state`` of ``message`` to its sender (a receipt, best effort)."""

    message: Enqueue
    state: str
    detail: str = ""
    changed: str = ""


@attrs.frozen
class Settle:
    """Settle the claimed message in the spool (``done/``): it never runs again."""

    claimed: Claimed


@attrs.frozen
class PutBack:
    """Put the claimed message back first in the spool's queue; the performer answers
    with ``Inbound.put_back``."""

    claimed: Claimed


@attrs.frozen
class Remove:
    """Settle a waiting message without running it; the performer answers with
    ``Inbound.removed`` (or refuses the command when it no longer waits)."""

    message_id: str


@attrs.frozen
class Held:
    """Message ``number`` from ``sender`` (raw label) waits for the user's approval."""

    number: int
    sender: str
    reason: HoldReason
    hops: int | None
    max_hops: int


@attrs.frozen
class WaitsForModel:
    """A relayed turn never reached the model: its message waits first for it."""

    sender: str


@attrs.frozen
class Dropped:
    """A message that could not be put back was dropped (``problem`` says why)."""

    problem: str


@attrs.frozen
class Withdrawn:
    """Its sender withdrew waiting message ``number`` before it ran."""

    number: int
    message_id: str
    sender: str


Notice = Held | WaitsForModel | Dropped | Withdrawn

# What the relay link carries out. ``PutBack`` and ``Remove`` are not: the machine needs
# the spool's answer (``put_back``, ``removed``), so whoever feeds it does them in between.
Effect = Tell | Settle | Notice


@attrs.frozen
class InboxRow:
    """One waiting message in ``/agents inbox``; ``seen``: when it arrived (the clock's)."""

    number: int
    held: bool
    sender: str
    verified: bool
    seen: float
    body: str
    message_id: str


@attrs.frozen
class InboxView:
    """``/agents inbox``: the policy, whether Escape stopped relayed work, the waiting
    messages oldest first, and the clock's ``now`` to age them by."""

    mode: InboundMode
    stopped: bool
    rows: tuple[InboxRow, ...]
    now: float


@attrs.frozen
class Shown:
    """``/agents show N``: one waiting message whole, and the clock's ``now``."""

    row: InboxRow
    now: float


@attrs.frozen
class ModeSet:
    """``/agents hold|accept`` took effect; ``held``: how many are held now."""

    mode: InboundMode
    held: int
    waiting: int


@attrs.frozen
class Approved:
    """``/agents approve N``: the message (``row``) runs in its turn (``was_held``: it was
    held; otherwise nothing changed)."""

    row: InboxRow
    was_held: bool


@attrs.frozen
class Denied:
    """``/agents deny N``: message ``number`` from ``sender`` was removed unrun."""

    number: int
    sender: str
