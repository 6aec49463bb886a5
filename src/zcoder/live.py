"""Live turn output: what the agent loop reports while a turn runs.

The loop calls ``TurnSink.emit`` with these small records; the one-shot mode prints them and
the interactive app draws them. Finished transcript entries travel as ``Entry`` wrapping a
``TranscriptEvent`` (the same object the session stores). Pure data, floor 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs

from zcoder.conversation import ToolResult, TranscriptEvent

__all__ = [
    "CommandsGranted",
    "ContextFill",
    "Entry",
    "LiveEvent",
    "StateChange",
    "TextDelta",
    "ThinkingDelta",
    "ToolState",
    "ToolUpdate",
    "TurnSink",
    "TurnState",
]

TurnState = Literal[
    "thinking",
    "streaming",
    "running_tool",
    "waiting_approval",
    "compacting",
    "ready",
    "stopped",
    "error",
]
# "delivered" / "undelivered": a relay send the receiver stored / did not store (refused,
# or no answer). A send card says what became of the delivery only: what became of the
# task is the receiver's to report (receipts), never "completed" on the card.
ToolState = Literal[
    "pending",
    "running",
    "completed",
    "delivered",
    "failed",
    "undelivered",
    "denied",
    "interrupted",
]


@attrs.frozen
class TextDelta:
    """A piece of the assistant's answer, as it streams."""

    text: str


@attrs.frozen
class ThinkingDelta:
    """A piece of the model's thinking, as it streams."""

    text: str


_NO_RESULT = ToolResult("")  # a pending or running call has none yet


@attrs.frozen
class ToolUpdate:
    """A tool card changed state. ``call_key`` is unique within the turn.

    ``result`` is the tool's result as far as there is one (empty while it is pending or
    running); the card shows its ``summary``, its ``diff`` and a few lines of its ``output``.
    ``arguments`` are the call's arguments as the model sent them (the one-shot mode's JSON
    output reports them; the card shows only ``target``).
    """

    call_key: str
    name: str
    target: str
    state: ToolState
    result: ToolResult = _NO_RESULT
    arguments: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def summary(self) -> str:
        return self.result.summary

    @property
    def diff(self) -> str:
        return self.result.diff

    @property
    def output(self) -> str:
        return self.result.output


@attrs.frozen
class StateChange:
    """The turn moved to another state (drives the status bar)."""

    state: TurnState
    detail: str = ""


@attrs.frozen
class Entry:
    """A finished transcript entry (assistant message, tool result, notice, error, relay)."""

    event: TranscriptEvent


@attrs.frozen
class ContextFill:
    """How full the next request will make the context window (the status bar's ``ctx``)."""

    tokens: int
    window: int

    @property
    def percent(self) -> int:
        return min(999, round(100 * self.tokens / max(1, self.window)))


@attrs.frozen
class CommandsGranted:
    """Whether the user's ``a`` ("allow all commands in this conversation") holds: set by
    that answer, cleared when the agent moves to another conversation (the status bar's
    ``all commands allowed``)."""

    granted: bool


LiveEvent = (
    TextDelta | ThinkingDelta | ToolUpdate | StateChange | Entry | ContextFill | CommandsGranted
)


class TurnSink(Protocol):
    """Receives live output; called from the Trio thread, must not block."""

    def emit(self, event: LiveEvent) -> None: ...
