"""The messages of the interactive app, by who sends them.

Keys (the terminal's bindings -> the controller): ``Submit``, ``CancelTurn``, ``ExitRequest``.
Intents (the controller -> the worker, over a memory channel): ``Prompt``, ``Command``,
``CancelTurn``, ``RelayControl``, ``WarmUpRequest``. Worker events (the worker -> the controller,
which renders them): ``Show`` and the rest of ``WorkerEvent``. The worker decides the order of
all work and runs it, commands included (``Lines``, ``Replay`` and ``Notice`` are what they
show); the UI only asks and shows.
"""

from __future__ import annotations

import attrs

from zcoder.commands import ParsedCommand
from zcoder.conversation import TranscriptEvent
from zcoder.live import LiveEvent

__all__ = [
    "CancelTurn",
    "Command",
    "ExitRequest",
    "Intent",
    "Lines",
    "Notice",
    "Prompt",
    "Queued",
    "Refresh",
    "RelayControl",
    "RelayStopped",
    "Replay",
    "Returned",
    "ServerState",
    "Show",
    "Submit",
    "TurnBegan",
    "TurnEnded",
    "UiEvent",
    "WarmUpRequest",
    "WarmUpState",
    "WorkerEvent",
]


# -- keys -----------------------------------------------------------------------------------
@attrs.frozen
class Submit:
    """Enter on a non-empty input: a prompt or a slash command."""

    text: str


@attrs.frozen
class CancelTurn:
    """Escape while a turn runs (also the intent the controller forwards)."""


@attrs.frozen
class ExitRequest:
    """Leave the app: ``user`` (Ctrl-D, Ctrl-C, /quit) or a signal name."""

    reason: str = "user"


UiEvent = Submit | CancelTurn | ExitRequest


# -- intents --------------------------------------------------------------------------------
@attrs.frozen
class Prompt:
    """Text for the model, queued in the order typed."""

    text: str


@attrs.frozen
class Command:
    """An idle-only command (``/new``, ``/sessions N``, ``/model NAME``): queued like a
    prompt, run between turns. ``text`` is as typed (Escape hands it back)."""

    parsed: ParsedCommand
    text: str


@attrs.frozen
class RelayControl:
    """``/agents pause`` or ``/agents resume`` (which also ends a hold)."""

    action: str


@attrs.frozen
class WarmUpRequest:
    """The model or session changed: warm the model up (when idle)."""


Intent = Prompt | Command | CancelTurn | RelayControl | WarmUpRequest


# -- worker events --------------------------------------------------------------------------
@attrs.frozen
class Show:
    """A live event of the running turn (text, tool cards, state, transcript entries)."""

    event: LiveEvent


@attrs.frozen
class Notice:
    text: str
    role: str = "system"


@attrs.frozen
class TurnBegan:
    """A turn started; ``relayed_from`` names the sender's project of a relayed turn."""

    relayed_from: str = ""


@attrs.frozen
class TurnEnded:
    """``ran``: the turn did something to show (a relay claim may find nothing)."""

    ran: bool


@attrs.frozen
class Queued:
    """The local queue, oldest first (as typed)."""

    texts: tuple[str, ...]


@attrs.frozen
class Returned:
    """Escape: these queued items go back into the input, before the draft."""

    texts: tuple[str, ...]


@attrs.frozen
class Lines:
    """A block to print: ``title`` and its ``lines`` (``hang``: their continuation indent),
    what a command the worker ran has to show."""

    title: str
    lines: tuple[str, ...] = ()
    hang: int | None = None


@attrs.frozen
class Replay:
    """Draw these transcript entries again (the last ones of a session switched to)."""

    events: tuple[TranscriptEvent, ...]


@attrs.frozen
class WarmUpState:
    """``warming up``, ``warm``, ``warm-up failed`` (with the problem) or ``""``."""

    state: str
    problem: str = ""


@attrs.frozen
class ServerState:
    """The start-up check found the server or model missing: ``problem`` says why."""

    problem: str


@attrs.frozen
class RelayStopped:
    """Relayed work is stopped (Escape on a relayed turn) or runs again."""

    stopped: bool


@attrs.frozen
class Refresh:
    """Something the status bar shows may have changed (model, session, relay)."""


WorkerEvent = (
    Show
    | Notice
    | TurnBegan
    | TurnEnded
    | Queued
    | Returned
    | Lines
    | Replay
    | WarmUpState
    | ServerState
    | RelayStopped
    | Refresh
)
