"""The JSON records of ``--output-format json|stream-json``, pure (the schema is
``docs/output-format.rst``; keep the two together).

Every record is a JSON object with a ``type``. ``event_record`` turns a live event into its
stream-json record (or None for one that has none); ``Report`` follows the events of the run
and builds its ``result`` record: the answer, the status, the tool calls, the changed files,
the token usage, the session id and the error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zcoder.agent.turns import OutcomeStatus
from zcoder.conversation import ToolResult
from zcoder.live import (
    CommandsGranted,
    ContextFill,
    LiveEvent,
    StateChange,
    TextDelta,
    ThinkingDelta,
    ToolUpdate,
)
from zcoder.oneshot.usage import Usage
from zcoder.tools.registry import Toolbox

__all__ = ["MESSAGE_ROLES", "Report", "event_record", "tool_result_record"]

# Transcript entries that become ``message`` records (tool entries are ``tool`` records).
MESSAGE_ROLES = ("user", "assistant", "system", "error")
_FINISHED = ("completed", "delivered", "failed", "undelivered", "denied", "interrupted")


def tool_result_record(result: ToolResult) -> dict[str, Any]:
    """What a finished call gave: ``text`` went back to the model, ``summary`` is its line."""
    return {"ok": result.ok, "summary": result.summary, "text": result.text, "diff": result.diff}


def _tool_record(update: ToolUpdate) -> dict[str, Any]:
    done = update.state in _FINISHED
    return {
        "type": "tool",
        "id": update.call_key,
        "name": update.name,
        "target": update.target,
        "state": update.state,
        "arguments": dict(update.arguments),
        "result": tool_result_record(update.result) if done else None,
    }


def event_record(event: LiveEvent) -> dict[str, Any] | None:
    """The stream-json record of one live event; None for a tool's transcript entry (its
    ``tool`` records say it all) and a relay entry (never in one-shot mode)."""
    if isinstance(event, TextDelta):
        return {"type": "text", "delta": event.text}
    if isinstance(event, ThinkingDelta):
        return {"type": "thinking", "delta": event.text}
    if isinstance(event, ToolUpdate):
        return _tool_record(event)
    if isinstance(event, StateChange):
        return {"type": "state", "state": event.state, "detail": event.detail}
    if isinstance(event, ContextFill):
        return {
            "type": "context",
            "tokens": event.tokens,
            "window": event.window,
            "percent": event.percent,
        }
    if isinstance(event, CommandsGranted):
        return {"type": "commands_allowed", "allowed": event.granted}
    if event.event.role in MESSAGE_ROLES:
        return {"type": "message", "role": event.event.role, "text": event.event.text}
    return None


def _shown(workspace: Path, raw: str) -> str:
    """A path as the tools took it, relative to the workspace when inside it."""
    path = Path(raw).expanduser()
    path = Path(os.path.normpath(path if path.is_absolute() else workspace / path))
    try:
        return path.relative_to(workspace).as_posix()
    except ValueError:
        return str(path)


class Report:
    """What the result record says about the run's tool calls, files and tokens."""

    def __init__(self, workspace: Path) -> None:
        self._workspace = workspace
        self._calls: dict[str, dict[str, Any]] = {}  # by call key, in the order first seen
        self._changed: dict[str, None] = {}  # an ordered set
        self.usage = Usage()

    def take(self, event: LiveEvent) -> None:
        if not isinstance(event, ToolUpdate):
            return
        done = event.state in _FINISHED
        self._calls[event.call_key] = {
            "id": event.call_key,
            "name": event.name,
            "target": event.target,
            "arguments": dict(event.arguments),
            "state": event.state,
            "ok": event.result.ok if done else None,
            "summary": event.result.summary,
        }
        if event.state == "completed":
            for raw in Toolbox.paths_written(event.name, event.arguments):
                self._changed.setdefault(_shown(self._workspace, raw), None)

    def result(
        self,
        *,
        status: OutcomeStatus,
        answer: str,
        error: str,
        exit_code: int,
        session_id: str | None,
        duration_ms: int,
    ) -> dict[str, Any]:
        """The ``result`` record, the last line of every JSON run."""
        return {
            "type": "result",
            "status": status,
            "answer": answer,
            "error": error or None,
            "exit_code": exit_code,
            "session_id": session_id,
            "tool_calls": list(self._calls.values()),
            "changed_files": list(self._changed),
            "usage": self.usage.record(),
            "duration_ms": duration_ms,
        }
