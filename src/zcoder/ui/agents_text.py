"""The words of ``/agents`` and of the relay's notices: its state, pause, resume, the
Escape stop, and why it is off or unavailable.

One word per idea: *paused* (``/agents pause``: senders are refused), *held* (one message
waits for the user's ``/agents approve N``), *stopped* (Escape stopped a relayed turn: the
waiting messages run after ``/agents resume``).

The app reports what the relay is (``AgentsView``, plain data); this module alone says it
to the user, so the relay's code holds no user-facing sentence and one place keeps the
wording of ``/agents``, the worker's hold notices and ``/list-agents`` when the relay is off.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from zcoder.text.visible import escape_controls
from zcoder.ui.text import one_line, shorten

__all__ = [
    "INBOX_HELP",
    "OFF_REASON",
    "RUNS_AGAIN",
    "AgentsView",
    "agents_lines",
    "body_lines",
    "first_line",
    "not_listed",
    "refused_line",
    "stopped_notice",
    "unavailable_line",
]

OFF_REASON = "switched off by ZCODER_RELAY=off"
RUNS_AGAIN = "Relayed work runs again, in order."
_OFF_FIX = "unset it, or set ZCODER_RELAY=on, and restart zcoder to use it"
_SETTING_FIX = "fix it and restart zcoder"
_PAUSED = "Relay paused: new relayed messages are refused; accepted ones wait."
_RESUMED = "Relay resumed: accepting relayed messages again."
_CONTROL_HELP = (
    "/agents pause   refuse new relayed messages; those already accepted wait",
    "/agents resume  accept again, and run the waiting ones in order",
)
INBOX_HELP = (
    "/agents hold    hold every new relayed message for you; /agents accept undoes it",
    "/agents inbox   list waiting messages; /agents show N reads one whole, "
    "/agents approve N runs it, /agents deny N drops it",
    "/agents sent    the messages you sent and what their receivers reported; "
    "/agents cancel N withdraws one still queued",
)


@attrs.frozen
class AgentsView:
    """What the relay of this instance is, for ``/agents``. ``state`` is ``on``,
    ``paused``, ``off`` (by configuration: ``bad_setting`` when an invalid setting switched
    it off) or ``unavailable``; ``reason`` says why when it is not running."""

    state: str
    reason: str = ""
    bad_setting: bool = False
    instance_id: str = ""
    pid: int = 0
    relay_dir: Path | None = None
    waiting: int = 0
    running: bool = False


def agents_lines(action: str, view: AgentsView) -> list[str]:
    """The lines ``/agents [action]`` shows after ``action`` (``""``, ``pause``, ``resume``)
    was applied; the first line is the heading."""
    if action == "pause":
        return [_PAUSED]
    if action == "resume":
        return [_RESUMED]
    if view.state == "off":
        fix = _SETTING_FIX if view.bad_setting else _OFF_FIX
        return [f"Relay off: {view.reason}; {fix}."]
    if view.state == "unavailable":
        return [unavailable_line(view.reason)]
    running = " (1 running)" if view.running else ""
    return [
        f"Relay {view.state} · instance {view.instance_id} · pid {view.pid}",
        f"socket dir {view.relay_dir}",
        f"{view.waiting} waiting{running}",
        *_CONTROL_HELP,
    ]


_RESTART = (
    "the relay starts with zcoder: once that is fixed, restart zcoder to turn it on "
    "(zcoder --resume ID keeps this session)"
)


def refused_line(sender: str) -> str:
    """A send this instance turned away because it is paused: its user paused it, and
    would otherwise never learn that someone tried (the sender was told ``paused``)."""
    return (
        f"Relay paused: a relayed message from {escape_controls(sender)} was refused "
        "(its sender was told this instance is paused); /agents resume accepts again."
    )


def unavailable_line(reason: str) -> str:
    """The relay cannot be used (told at start, once when it fails after its start, and
    by ``/agents``), and how to get it back: nothing retries it in this process, so a fix
    alone (the ``chmod 700`` the reason suggests) would leave it off without a word."""
    return f"Relay unavailable: {reason}; {_RESTART}."


def not_listed(reason: str) -> str:
    """``/list-agents`` while the relay is off here by configuration."""
    return f"The relay is off in this instance ({reason}): no instances listed."


def stopped_notice(waiting: int) -> str:
    """After Escape stopped a relayed turn with ``waiting`` more messages queued: relayed
    work is *stopped* (not *held*, which is one message waiting for the user's approval,
    nor *paused*, which refuses senders)."""
    many = waiting > 1
    return (
        f"Relayed work stopped: {waiting} more relayed message{'s wait' if many else ' waits'}"
        f"; /agents resume runs {'them' if many else 'it'} (new ones are still accepted "
        "meanwhile)."
    )


def body_lines(body: str) -> list[str]:
    """A relayed message's text, line by line, as ``/agents show`` prints it: whole, its
    control characters drawn visibly (a carriage return cannot hide what precedes it)."""
    text = body.replace("\r\n", "\n").strip("\n")
    return [escape_controls(line, keep="\t") for line in text.split("\n")]


def first_line(body: str, width: int = 60) -> str:
    """A relayed message's first line in at most ``width`` columns, then how many lines
    follow (``(+2 lines)``): a listing must never pass for the whole of a longer message."""
    lines = body.replace("\r\n", "\n").strip().split("\n")
    first = shorten(one_line(lines[0]), width)
    more = len(lines) - 1
    return f"{first} (+{more} line{'' if more == 1 else 's'})" if more else first
