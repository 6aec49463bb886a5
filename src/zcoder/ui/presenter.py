"""The worker's events on the screen: the transcript view, the status bar, the input.

Pure rendering of what the worker decided (``ui.events.WorkerEvent``); it schedules nothing.
Read-only queries of the backend fill the status bar (model, session title, relay state).
"""

from __future__ import annotations

from zcoder.live import CommandsGranted, ContextFill, Entry, StateChange
from zcoder.ui.backend import Backend
from zcoder.ui.events import (
    Lines,
    Notice,
    Queued,
    Refresh,
    RelayStopped,
    Replay,
    Returned,
    ServerState,
    Show,
    TurnBegan,
    TurnEnded,
    WarmUpState,
    WorkerEvent,
)
from zcoder.ui.render import render_block
from zcoder.ui.terminal import Terminal

__all__ = ["Presenter"]


class Presenter:
    def __init__(self, terminal: Terminal, backend: Backend) -> None:
        self.terminal = terminal
        self.backend = backend
        self.view = terminal.view
        self.status = terminal.status

    def apply(self, event: WorkerEvent) -> None:
        """Show one worker event."""
        if isinstance(event, Show):
            self._live(event)
        elif isinstance(event, Notice):
            self.view.notice(event.text, event.role)
        elif isinstance(event, TurnBegan):
            self._began(event.relayed_from)
        elif isinstance(event, TurnEnded):
            self._ended()
        elif isinstance(event, Queued):
            self.view.queued[:] = event.texts
            self._queue_changed()
        elif isinstance(event, Returned):
            self._returned(event.texts)
        elif isinstance(event, WarmUpState):
            self._warmup(event)
        elif isinstance(event, ServerState):
            self.view.notice(event.problem, "error")
            self.status.set_state("offline", event.problem)
        elif isinstance(event, RelayStopped):
            self.status.relay_stopped = event.stopped
        elif isinstance(event, Refresh):
            self.refresh_status()
        elif isinstance(event, Lines):
            self.print_block(event.title, list(event.lines), event.hang)
        elif isinstance(event, Replay):
            for entry in event.events:
                self.view.show(entry)
        self.terminal.invalidate()

    def print_block(self, title: str, lines: list[str], hang: int | None = None) -> None:
        """A titled block of lines above the app, at the terminal's width."""
        width = self.terminal.width()
        self.terminal.print_above(render_block(title, lines, width, hang=hang))

    def _live(self, show: Show) -> None:
        event = show.event
        self.view.apply(event)
        if isinstance(event, StateChange):
            self.status.set_state(event.state, event.detail)
        elif isinstance(event, ContextFill):
            self.status.context = event.percent
        elif isinstance(event, CommandsGranted):
            self.status.commands_granted = event.granted
        elif isinstance(event, Entry) and event.event.role == "user":
            self.refresh_status()  # the first prompt names the session

    def _began(self, relayed_from: str) -> None:
        self.status.began()  # the worker's word: a turn runs (``Terminal.turn_running``)
        self.status.relayed_from = relayed_from
        self._queue_changed()

    def _ended(self) -> None:
        self.status.ended()
        self.status.relayed_from = ""
        self.view.end_turn()  # whatever the turn left half shown is flushed or closed
        self._queue_changed()

    def _returned(self, texts: tuple[str, ...]) -> None:
        buffer = self.terminal.buffer
        draft = "\n".join([*texts, buffer.text]).rstrip("\n")  # as typed (the worker's)
        buffer.text = draft
        buffer.cursor_position = len(draft)

    def _warmup(self, event: WarmUpState) -> None:
        if event.state == "":
            if self.status.warmup == "warming up":
                self.status.warmup = ""
            return
        self.status.warmup = event.state
        if event.problem:
            self.view.notice(f"warm-up failed: {event.problem}", "error")
            if not self.status.turn_running:
                self.status.set_state("offline", event.problem)
        elif event.state == "warm" and self.status.state in ("offline", "error"):
            self.status.set_state("ready")  # the server answered: it works again

    def _queue_changed(self) -> None:
        self.status.queued_prompts = len(self.view.queued) if self.terminal.turn_running else 0

    def refresh_status(self) -> None:
        self.status.model = self.backend.model
        self.status.title = self.backend.session_title
        self.status.relay, self.status.relay_queued = self.backend.inbox.status()
        self.status.relay_waits_model = self.backend.inbox.waits_for_model()
        self.status.context = self.backend.context_percent()
        self.terminal.invalidate()
