"""Every accepted relayed message of this instance: the inbound state machine, sans-I/O.

``machine.Inbound`` owns each message from its arrival to its settling (waiting, held,
running, settled) and what stops every claim for a while; ``policy`` decides, once, whether
a new message is held; ``effects`` are the typed records its transitions return (receipts
to send, spool operations, notices for the user, the answers of ``/agents``). It imports
neither Trio, prompt_toolkit, ``ui`` nor ``app``: the app's relay link performs what it
returns, and ``ui/inbound_text.py`` words it.
"""

from __future__ import annotations

from zcoder.relay.inbound.effects import (
    Approved,
    Denied,
    Dropped,
    Effect,
    Held,
    InboxRow,
    InboxView,
    ModeSet,
    Notice,
    PutBack,
    Remove,
    Settle,
    Shown,
    Tell,
    WaitsForModel,
    Withdrawn,
    sender_label,
)
from zcoder.relay.inbound.machine import INBOX_ACTIONS, Inbound
from zcoder.relay.inbound.policy import HoldReason, RoundTrips, hold_reason

__all__ = [
    "INBOX_ACTIONS",
    "Approved",
    "Denied",
    "Dropped",
    "Effect",
    "Held",
    "HoldReason",
    "Inbound",
    "InboxRow",
    "InboxView",
    "ModeSet",
    "Notice",
    "PutBack",
    "Remove",
    "RoundTrips",
    "Settle",
    "Shown",
    "Tell",
    "WaitsForModel",
    "Withdrawn",
    "hold_reason",
    "sender_label",
]
