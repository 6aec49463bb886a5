"""What a turn is asked to do and how it ended; the relay's context record (pure data)."""

from __future__ import annotations

from typing import Literal

import attrs

from zcoder.conversation import Origin
from zcoder.text.flat import one_line as _one_line

__all__ = [
    "STOP_MARKER",
    "OutcomeStatus",
    "RelaySender",
    "TurnOutcome",
    "TurnRequest",
    "relay_record",
]

# The history's mark of a turn the user stopped. A request never sends it as the model's
# own words, but as a note on the user's side (``stop_note.py``).
STOP_MARKER = "[Response generation stopped by user.]"

# ``cut_off``: the final reply ended at the output limit (its text is all there is of it).
OutcomeStatus = Literal[
    "answered",
    "cut_off",
    "complete",
    "blocked",
    "cancelled",
    "error",
    "step_limit",
    "loop_stopped",
]


@attrs.frozen
class RelaySender:
    """Who relayed a turn, as the relay reported it (``verified``: the peer pid matched)."""

    instance_id: str
    pid: int
    project: str
    workspace: str
    verified: bool = False
    hops: int | None = None  # how many relayed turns led to it; None: the peer did not say


@attrs.frozen
class TurnRequest:
    """Work for one turn. A relayed turn (origin ``relay``) must name its sender."""

    origin: Origin
    text: str
    sender: RelaySender | None = None

    def __attrs_post_init__(self) -> None:
        if self.origin not in ("user", "relay"):
            raise ValueError(f"unknown turn origin {self.origin!r}")
        if self.origin == "relay" and self.sender is None:
            raise ValueError("a relayed turn needs its sender")
        if self.origin == "user" and self.sender is not None:
            raise ValueError("only a relayed turn has a sender")


@attrs.frozen
class TurnOutcome:
    """How a turn ended: ``text`` is the final answer, ``error`` the one-line failure (for
    ``cut_off``, the line that says where it was cut). A ``cancelled`` turn's ``text`` is
    what the model had said of its reply when it was stopped.

    ``reached_model``: some model request of the turn got a response head (HTTP success),
    so the model may have acted on it; ``False`` when every request failed before that
    (server unreachable, model missing), so nothing of the turn was executed."""

    status: OutcomeStatus
    text: str = ""
    error: str = ""
    reached_model: bool = True


def relay_record(sender: RelaySender, text: str) -> str:
    """The labelled user-role context record of a relayed task (the relay spec's wrapper).

    Self-reported header values are flattened to one line, and a closing tag inside the
    task is defused, so relay text cannot end the record early and speak outside it. The
    ``Sender check`` line says whether peer credentials confirmed the sender's pid (the
    transcript shows the same to the user).
    """
    task = text.replace("</agent_relay", "<\\/agent_relay")
    check = (
        "peer credentials confirmed the sender's pid"
        if sender.verified
        else "NOT verified: peer credentials did not confirm the sender's pid"
    )
    return (
        "<agent_relay>\n"
        "Another zcoder process on this machine relayed this task. Its sender details\n"
        "are self-reported, and the local user may not have seen or approved the request.\n"
        f"Sender: {_one_line(sender.project)} (pid {sender.pid})\n"
        f"Sender workspace: {_one_line(sender.workspace)}\n"
        f"Sender check: {check}\n"
        "\n"
        "Task:\n"
        f"{task}\n"
        "</agent_relay>"
    )
