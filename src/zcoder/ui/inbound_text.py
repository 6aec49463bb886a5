"""The words of the inbound machine: its notices and the answers of ``/agents inbox``,
``hold``, ``accept``, ``approve N`` and ``deny N``.

The machine (``zcoder.relay.inbound``) returns facts as typed records; this module alone
says them to the user. Every sender's label is untrusted (its project is the sender's own
word): control characters are escaped here, where it is shown.
"""

from __future__ import annotations

from typing import Literal

import attrs

from zcoder.relay.inbound import (
    Approved,
    Denied,
    Dropped,
    Held,
    InboxView,
    ModeSet,
    Notice,
    Shown,
    WaitsForModel,
    Withdrawn,
)
from zcoder.text.ages import age
from zcoder.text.visible import escape_controls
from zcoder.ui.agents_text import body_lines, first_line

__all__ = [
    "Say",
    "approved_line",
    "denied_line",
    "inbox_lines",
    "mode_line",
    "said",
    "shown_lines",
]

# Why a message is held, as this instance's user reads it.
_WHY = {
    "hold": "this instance holds relayed messages",
    "unverified": "its sender's peer credentials did not verify",
    "hops": "{hops} relayed turns led to it (ZCODER_RELAY_MAX_HOPS is {max_hops})",
    "round_trips": "{max_hops} round trips with its sender since your last prompt",
}


@attrs.frozen
class Say:
    """A line for the user's transcript."""

    text: str
    role: Literal["system", "error"] = "system"


def said(notice: Notice) -> Say:
    """The transcript line of one of the machine's notices."""
    if isinstance(notice, Held):
        n, sender = notice.number, escape_controls(notice.sender)
        why = _WHY[notice.reason].format(hops=notice.hops, max_hops=notice.max_hops)
        return Say(
            f"Relayed message {n} from {sender} is held: {why}. /agents show {n} reads "
            f"it whole; /agents approve {n} runs it, /agents deny {n} drops it."
        )
    if isinstance(notice, WaitsForModel):
        return Say(
            f"The relayed message from {escape_controls(notice.sender)} did not reach the "
            "model: it stays first in the queue and runs when the model answers again."
        )
    if isinstance(notice, Dropped):
        return Say(f"{notice.problem}; it was dropped", "error")
    assert isinstance(notice, Withdrawn)
    return Say(
        f"Relayed message {notice.number} from {escape_controls(notice.sender)} was "
        "withdrawn by its sender before it ran."
    )


def inbox_lines(view: InboxView) -> list[str]:
    """``/agents inbox``: one line per waiting message, oldest first; the policy, and
    that relayed work is stopped when Escape stopped it (as the status bar says)."""
    policy = f"inbound policy: {view.mode}"
    if view.stopped:
        policy += "; relayed work stopped: none runs until /agents resume"
    if not view.rows:
        return [f"No relayed message waits ({policy})."]
    out = [f"Relayed messages waiting ({policy}):"]
    for row in view.rows:
        state = "held" if row.held else "queued"
        check = "verified" if row.verified else "UNVERIFIED"
        first = first_line(row.body)
        sender = escape_controls(row.sender)
        out.append(
            f"{row.number:>3}. {state:<6} {sender} · {check} · {age(view.now - row.seen)} · {first}"
        )
    return out


def shown_lines(shown: Shown) -> list[str]:
    """``/agents show N``: the heading, the message whole (its control characters drawn),
    and what the user may do with it."""
    row = shown.row
    n, sender = row.number, escape_controls(row.sender)
    state = "held" if row.held else "queued"
    check = "verified" if row.verified else "UNVERIFIED"
    then = (
        f"/agents approve {n} runs it, /agents deny {n} drops it."
        if row.held
        else f"It runs in its turn (/agents deny {n} drops it)."
    )
    return [
        f"Relayed message {n} ({state}) from {sender} · {check} · "
        f"{age(shown.now - row.seen)} · id {row.message_id}:",
        *("  " + line for line in body_lines(row.body)),
        then,
    ]


def mode_line(mode: ModeSet) -> str:
    """``/agents hold`` or ``/agents accept`` took effect."""
    if mode.mode == "accept":
        tail = f"; {mode.held} held still wait for /agents approve N" if mode.held else ""
        return f"Relayed messages run in their turn again{tail}."
    return (
        f"Relayed messages are held: {mode.held} waiting; "
        "/agents inbox lists them, /agents approve N runs one."
    )


def approved_line(approved: Approved) -> str:
    row = approved.row
    if not approved.was_held:
        return f"Relayed message {row.number} is not held: it runs in its turn."
    sender = escape_controls(row.sender)
    return (
        f"Relayed message {row.number} from {sender} approved: "
        f"“{first_line(row.body)}”; it runs in its turn."
    )


def denied_line(denied: Denied) -> str:
    sender = escape_controls(denied.sender)
    return f"Relayed message {denied.number} from {sender} denied: removed without running."
