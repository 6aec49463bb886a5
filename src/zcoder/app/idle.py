"""The idle-only commands, run by the worker in its own task between turns.

``/new``, ``/model NAME``, ``/sessions N``, ``/compact``, ``/undo`` and ``/rewind N``
change the session, the model or the files a turn works on, so they wait in the worker's
queue like prompts and run where turns run: here, called by ``TurnWorker``, one at a time,
never beside a turn. What they have to show goes to the UI as worker events (``Notice``,
``Lines``, ``Replay``, ``Refresh``), which the UI only draws. The listing forms (``/model``,
``/sessions``, ``/rewind`` without an argument) change nothing and stay the UI's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from zcoder.app.welcome import REPLAY, not_shown
from zcoder.commands import ParsedCommand
from zcoder.errors import ZcoderError
from zcoder.text.flat import one_line
from zcoder.ui.backend import Backend
from zcoder.ui.events import Notice, Refresh, Replay, WorkerEvent

__all__ = ["IDLE", "IdleCommands"]

_LIST_SECONDS = 10.0  # a listing the command needs (models, sessions) that hangs
#: The commands whose idle-only forms run here (the UI runs the rest and the listings).
IDLE = frozenset({"new", "model", "sessions", "compact", "undo", "rewind"})


class IdleCommands:
    """Runs one idle-only command over ``backend``; ``send`` takes what it shows."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._handlers: dict[str, Callable[[str, Callable[[WorkerEvent], None]], Awaitable[bool]]]
        self._handlers = {  # the names of ``IDLE``
            "new": self._new,
            "model": self._model,
            "sessions": self._sessions,
            "compact": self._compact,
            "undo": self._undo,
            "rewind": self._rewind,
        }

    async def run(self, parsed: ParsedCommand, send: Callable[[WorkerEvent], None]) -> bool:
        """Run ``parsed``; whether the model or the session changed (worth a warm-up). A
        refusal (``ZcoderError``) or a listing that hangs is one error line."""
        name = parsed.command.name
        try:
            return await self._handlers[name](parsed.args, send)
        except ZcoderError as exc:
            send(Notice(str(exc), "error"))
        except trio.TooSlowError:
            send(Notice(f"/{name} took too long and was abandoned.", "error"))
        return False

    async def _new(self, args: str, send: Callable[[WorkerEvent], None]) -> bool:
        self._backend.new_session()
        send(Refresh())
        send(Notice(f"New session {self._backend.session_id}."))
        return True

    async def _model(self, name: str, send: Callable[[WorkerEvent], None]) -> bool:
        with trio.fail_after(_LIST_SECONDS):
            models = await self._backend.list_models()
        name = self._backend.served_name(name.strip(), models)  # ZcoderError: not served
        self._backend.set_model(name)
        send(Refresh())
        send(Notice(f"Model set to {one_line(name)}."))
        return True

    async def _sessions(self, arg: str, send: Callable[[WorkerEvent], None]) -> bool:
        arg = arg.strip()
        with trio.fail_after(_LIST_SECONDS):
            rows = await self._backend.list_sessions()
        target = arg
        if arg.isdigit():  # a number, never an id (ids have an underscore)
            if not 1 <= int(arg) <= len(rows):
                count = f"1 to {len(rows)}" if len(rows) > 1 else "only 1"
                send(Notice(f"no session number {arg}: /sessions lists {count}", "error"))
                return False
            target = rows[int(arg) - 1].id
        if target == self._backend.session_id:
            send(Notice("That is the current session."))
            return False
        events = self._backend.switch_session(target)
        send(Replay(tuple(events[-REPLAY:])))
        send(Refresh())
        skipped = not_shown(len(events))
        send(Notice(f"Switched to session {target}{f' ({skipped})' if skipped else ''}."))
        return True

    async def _compact(self, focus: str, send: Callable[[WorkerEvent], None]) -> bool:
        # Run as a turn (Escape cancels it); the agent shows the outcome.
        await self._backend.compact(focus)
        send(Refresh())
        return False

    async def _undo(self, args: str, send: Callable[[WorkerEvent], None]) -> bool:
        for line in await self._backend.undo(None):
            send(Notice(line))
        return False

    async def _rewind(self, arg: str, send: Callable[[WorkerEvent], None]) -> bool:
        arg = arg.strip()
        if not arg.isdigit():
            send(Notice(f"/rewind takes a turn's number, not {arg!r} (see /rewind)", "error"))
            return False
        for line in await self._backend.undo(int(arg)):
            send(Notice(line))
        return False
