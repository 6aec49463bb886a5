"""The controller: the keys in, intents to the worker out, the worker's events on screen.

A Trio task beside the app. It decides no order and runs no work: a prompt, an idle-only
command (``/new``, ``/sessions N``, ``/model NAME`` ...), Escape and ``/agents`` (but
``sent`` and ``cancel``, the sender's side) go to the worker as intents, and the worker
runs them in its own task; the other commands only show something and run at once. The
worker's events, what its commands show included, are drawn by the ``Presenter``. Leaving
while accepted relayed messages have not run asks once: the first ``/quit`` (Ctrl-D,
Ctrl-C) says what would be dropped, the second leaves.
"""

from __future__ import annotations

import collections
import logging

import trio

from zcoder.commands import Refused, interpret
from zcoder.conversation import TranscriptEvent
from zcoder.ui.backend import Backend, Unrun
from zcoder.ui.events import (
    CancelTurn,
    Command,
    ExitRequest,
    Intent,
    Prompt,
    Submit,
    UiEvent,
    WorkerEvent,
)
from zcoder.ui.presenter import Presenter
from zcoder.ui.slash import SlashCommands
from zcoder.ui.terminal import Terminal

__all__ = ["Controller"]

_log = logging.getLogger(__name__)


def _unfinished(unrun: list[Unrun]) -> tuple[str, str]:
    """What has not finished and what leaving does to it: ``1 relayed message is running
    and 2 have not run yet``, ``leaving stops it and drops them`` and the like."""
    running = sum(u.running for u in unrun)
    waiting = len(unrun) - running
    many = waiting > 1
    if not running:
        return (
            f"{waiting} accepted relayed message{'s have' if many else ' has'} not run yet",
            f"leaving drops {'them' if many else 'it'}",
        )
    if not waiting:
        return "1 relayed message is running", "leaving stops it"
    return (
        f"1 relayed message is running and {waiting} {'have' if many else 'has'} not run yet",
        f"leaving stops it and drops {'them' if many else 'the other'}",
    )


def _senders(unrun: list[Unrun]) -> str:
    counts = collections.Counter(u.sender for u in unrun)
    if len(counts) == 1:  # "from alpha (pid 7)": the count is already said
        return next(iter(counts))
    return ", ".join(f"{who} ({n} messages)" if n > 1 else who for who, n in counts.items())


class Controller:
    """The UI side of the app; also the ``SlashHost`` of the slash commands."""

    def __init__(
        self,
        terminal: Terminal,
        backend: Backend,
        keys: trio.MemoryReceiveChannel[UiEvent],
        intents: trio.MemorySendChannel[Intent],
        events: trio.MemoryReceiveChannel[WorkerEvent],
    ) -> None:
        self.terminal = terminal
        self._backend = backend
        self.view = terminal.view
        self.status = terminal.status
        self.presenter = Presenter(terminal, backend)
        self._keys = keys
        self._intents = intents
        self._events = events
        self._warned_drop: set[str] | None = None  # the ids the last /quit warned about
        self.exit_reason = ""
        self.slash = SlashCommands(self)

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def turn_active(self) -> bool:
        return self.presenter.terminal.turn_running

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> str:
        """Handle keys and worker events until an exit is asked for; returns its reason."""
        self.refresh_status()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._render, nursery)
            task_status.started()
            await self._handle_keys(nursery)
            nursery.cancel_scope.cancel()
        return self.exit_reason

    async def _render(self, nursery: trio.Nursery) -> None:
        async for event in self._events:
            self.presenter.apply(event)

    async def _handle_keys(self, nursery: trio.Nursery) -> None:
        async for event in self._keys:
            if isinstance(event, ExitRequest):
                _log.debug("exit requested: %s", event.reason)
                if event.reason == "user" and self._warn_drop():
                    continue
                self.exit_reason = event.reason
                return
            if isinstance(event, CancelTurn):
                self.intend(CancelTurn())
            elif isinstance(event, Submit):
                self.submit(event.text, nursery)

    def submit(self, text: str, nursery: trio.Nursery) -> None:
        # A failure ("error", "offline") stays shown until a request succeeds: a slash
        # command or a new prompt is no sign that the model server works again.
        if self.status.state == "stopped":
            self.status.set_state("ready")
        parsed = interpret(text)
        if isinstance(parsed, str):
            self.intend(Prompt(parsed))
        elif isinstance(parsed, Refused):
            self.view.notice(parsed.problem, "error")
        elif parsed.command.needs_idle(parsed.args):
            self.intend(Command(parsed, text))
        else:
            nursery.start_soon(self.slash.run, parsed)

    def _warn_drop(self) -> bool:
        """True (and say so) when leaving would drop relayed messages not warned about yet;
        a second exit with nothing new leaves. Signals never ask: they leave at once."""
        unrun = self._backend.inbox.unrun()
        ids = {u.message_id for u in unrun}
        if not ids or (self._warned_drop is not None and ids <= self._warned_drop):
            return False
        self._warned_drop = ids
        what, leaving = _unfinished(unrun)
        self.view.notice(
            f"{what}, from {_senders(unrun)}: {leaving}. /quit or Ctrl-D again to leave anyway."
        )
        return True

    # -- SlashHost ------------------------------------------------------------------------
    def intend(self, intent: Intent) -> None:
        self._intents.send_nowait(intent)

    def width(self) -> int:
        return self.terminal.width()

    def notice(self, text: str, role: str = "system") -> None:
        self.view.notice(text, role)

    def print_block(self, title: str, lines: list[str], hang: int | None = None) -> None:
        self.presenter.print_block(title, lines, hang)

    def show(self, event: TranscriptEvent) -> None:
        self.view.show(event)

    def refresh_status(self) -> None:
        self.presenter.refresh_status()

    def request_exit(self, reason: str = "user") -> None:
        """Ask to leave, as the keys do (a signal name leaves without asking)."""
        self.terminal.post(ExitRequest(reason))
