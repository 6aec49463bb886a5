"""Shared data: model messages, tool calls and results, and visible transcript events.

Pure data at the bottom of the house: the agent, the session store, the tools and the UI all
import it, and it imports none of them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = [
    "EventRole",
    "Message",
    "MessageRole",
    "Origin",
    "ToolCall",
    "ToolResult",
    "TranscriptEvent",
]

MessageRole = Literal["system", "user", "assistant", "tool"]
EventRole = Literal["user", "assistant", "tool", "system", "error", "relay"]
Origin = Literal["user", "relay"]


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(value)


@attrs.frozen
class ToolCall:
    """One call the model asked for; ``arguments`` is always a JSON object.

    ``problem`` says why the arguments the model sent could not be read (say, a string that
    is not JSON); such a call is answered with an ``Error:`` result and never run.
    """

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    id: str = ""
    problem: str = ""


@attrs.frozen
class ToolResult:
    """What goes back to the model (``text``), plus for the UI a one-line ``summary``, an
    optional ``diff`` and an optional ``output`` (a command's output, previewed under its
    card). ``ok`` is false for every ``Error: ...`` result. ``meta`` goes into the card's
    transcript entry (a send's message id, so that a resumed session knows what it sent)."""

    text: str
    ok: bool = True
    summary: str = ""
    diff: str = ""
    output: str = ""
    meta: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)


@attrs.frozen
class Message:
    """One entry of the model history, in Ollama's chat shape."""

    role: MessageRole
    content: str
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_name: str = ""


@attrs.frozen
class TranscriptEvent:
    """One visible transcript entry, as the user saw it (persisted with the session).

    ``meta`` carries role-specific details as strings: for ``tool`` the tool ``name``,
    ``target`` and ``state``; for ``relay`` the sender ``project``, ``pid``, ``workspace``
    and ``instance_id``.
    """

    role: EventRole
    text: str
    at: float = attrs.field(factory=time.time)
    meta: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
