"""The controller: UI events in, turns, cancels, commands and the exit out.

A Trio task beside the app. It owns the prompt queue and the one turn worker: Enter while
a turn runs queues the text (shown as queued); Escape cancels the turn and hands queued
prompts back to the input, so nothing starts that the user just tried to stop. It is also
the agent's ``TurnSink``: live events update the transcript view and the status bar.

A relayed message whose turn could not reach the model waits first in the queue; the
controller then checks the server again with a growing pause (``model_retry``: first and
longest, in seconds), so it runs once the model answers, without a busy loop. The pause
grows across such failures and starts again from the first only when a relayed turn
reaches the model. Leaving while accepted relayed messages have not run asks once: the
first ``/quit`` (Ctrl-D, Ctrl-C) says what would be dropped, the second leaves.
"""

from __future__ import annotations

import collections
import functools
import logging
import math
from collections.abc import Awaitable, Callable

import trio

from zcoder.commands import parse
from zcoder.live import Entry, LiveEvent, StateChange
from zcoder.ui.backend import Backend, Unrun
from zcoder.ui.events import CancelTurn, ExitRequest, Submit, UiEvent
from zcoder.ui.slash import SlashCommands
from zcoder.ui.terminal import Terminal

__all__ = ["Controller"]

_log = logging.getLogger(__name__)
_CHECK_SECONDS = 5.0
MODEL_RETRY = (2.0, 60.0)


def _senders(unrun: list[Unrun]) -> str:
    counts = collections.Counter(u.sender for u in unrun)
    return ", ".join(f"{who} ({n})" if n > 1 else who for who, n in counts.items())


class Controller:
    def __init__(
        self,
        terminal: Terminal,
        backend: Backend,
        *,
        warmup: bool = True,
        model_retry: tuple[float, float] = MODEL_RETRY,
    ) -> None:
        self.terminal = terminal
        self.backend = backend
        self.view = terminal.view
        self.status = terminal.status
        self.queue: list[str] = terminal.view.queued
        self._warmup_enabled = warmup
        self._warm_scope: trio.CancelScope | None = None
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.turn_active = False
        self._relay_turn = False
        self._requeued = False
        self._after_turn: list[str] = []
        self._model_retry = model_retry
        self._retry_delay = model_retry[0]
        self._probing = False
        self._warned_drop: set[str] | None = None  # the ids the last /quit warned about
        self.exit_reason = ""
        self.slash = SlashCommands(self)
        send, self.receive = trio.open_memory_channel[UiEvent](math.inf)
        self.send = send

    # -- TurnSink -------------------------------------------------------------------------
    def emit(self, event: LiveEvent) -> None:
        self.view.apply(event)
        if isinstance(event, StateChange):
            self.status.set_state(event.state, event.detail)
        elif isinstance(event, Entry) and event.event.role == "user":
            self.refresh_status()  # the first prompt names the session
        self.terminal.invalidate()

    # -- events ---------------------------------------------------------------------------
    def post(self, event: UiEvent) -> None:
        """Queue a UI event (call on the Trio side: via ``trio_token.run_sync_soon``)."""
        self.send.send_nowait(event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> str:
        """Handle events until an exit is asked for; returns its reason."""
        self.refresh_status()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._worker)
                nursery.start_soon(self.start_warmup, True)
                task_status.started()
                await self._handle_events()
                nursery.cancel_scope.cancel()
        finally:
            # Status refreshes go on while the app shuts down (the relay withdraws): they
            # must not start tasks any more.
            self._nursery = None
        return self.exit_reason

    async def _handle_events(self) -> None:
        async for event in self.receive:
            if isinstance(event, ExitRequest):
                _log.debug("exit requested: %s", event.reason)
                if event.reason == "user" and self._warn_drop():
                    continue
                self.exit_reason = event.reason
                return
            if isinstance(event, CancelTurn):
                self.cancel_turn()
            elif isinstance(event, Submit):
                self.submit(event.text)

    def request_exit(self, reason: str = "user") -> None:
        self.send.send_nowait(ExitRequest(reason))

    def _warn_drop(self) -> bool:
        """True (and say so) when leaving would drop relayed messages not warned about yet;
        a second exit with nothing new leaves. Signals never ask: they leave at once."""
        unrun = self.backend.relay_unrun()
        ids = {u.message_id for u in unrun}
        if not ids or (self._warned_drop is not None and ids <= self._warned_drop):
            return False
        self._warned_drop = ids
        many = len(unrun) > 1
        self.view.notice(
            f"{len(unrun)} accepted relayed message{'s have' if many else ' has'} not run "
            f"yet, from {_senders(unrun)}: leaving drops {'them' if many else 'it'}. "
            "/quit or Ctrl-D again to leave anyway."
        )
        return True

    def submit(self, text: str) -> None:
        # A failure ("error", "offline") stays shown until a request succeeds: a slash
        # command or a new prompt is no sign that the model server works again.
        if self.status.state == "stopped":
            self.status.set_state("ready")
        parsed = parse(text)
        if parsed is not None:
            problem = parsed.command.arg_problem(parsed.args)
            if problem:
                self.view.notice(problem, "error")
                return
            if parsed.command.needs_idle(parsed.args) and self.refuse_during_turn(
                parsed.command.name
            ):
                return
            assert self._nursery is not None
            self._nursery.start_soon(self.slash.run, parsed)
            return
        self.queue.append(text)
        self._queue_changed()
        self._wake.set()

    def refuse_during_turn(self, name: str) -> bool:
        """Say so and return True when a turn runs: an idle-only command must not run."""
        if not self.turn_active:
            return False
        self.view.notice(
            f"/{name} cannot run during a turn: wait for it to finish, or press Esc to stop it."
        )
        return True

    def cancel_turn(self) -> None:
        if not self.backend.cancel_turn():
            return
        _log.debug("turn cancel requested")
        if self._relay_turn:
            self._hold_relay()
        if self.queue:
            buffer = self.terminal.buffer
            draft = "\n".join([*self.queue, buffer.text]).rstrip("\n")
            self.queue.clear()
            self._queue_changed()
            buffer.text = draft
            buffer.cursor_position = len(draft)
            self._requeued = True

    def _hold_relay(self) -> None:
        # Like queued prompts, queued relayed messages must not start right after the user
        # stopped one: pause taking them (they stay queued) until /agents resume.
        state, waiting = self.backend.relay_status()
        if state != "on" or not waiting:
            return
        self.backend.relay_control("pause")
        self.refresh_status()
        many = waiting > 1
        # Shown when the turn has ended, after its stopped answer, like the queued prompts.
        self._after_turn.append(
            f"Relay paused: {waiting} more relayed message{'s wait' if many else ' waits'}"
            f"; /agents resume runs {'them' if many else 'it'} (new deliveries are refused "
            "meanwhile)."
        )

    def _queue_changed(self) -> None:
        self.status.queued_prompts = len(self.queue) if self.turn_active else 0
        self.terminal.invalidate()

    # -- turns ----------------------------------------------------------------------------
    def wake(self) -> None:
        """New work may be waiting (a prompt, or a relayed message): let the worker look."""
        self._wake.set()
        self.refresh_status()

    async def _worker(self) -> None:
        # One turn at a time: a waiting relayed message first, then the next local prompt.
        while True:
            if self.backend.relay_waiting() and await self._turn(self._relayed_turn):
                continue
            if self.queue:
                await self._turn(functools.partial(self._user_turn, self.queue.pop(0)))
                continue
            self._wake = trio.Event()
            await self._wake.wait()

    async def _relayed_turn(self) -> bool:
        self._relay_turn = True
        try:
            ran = await self.backend.run_relay_turn()
        finally:
            self._relay_turn = False
        if self.backend.relay_waits_for_model():
            self._start_probe()
        elif ran:
            self._retry_delay = self._model_retry[0]
        return ran

    def _start_probe(self) -> None:
        if not self._probing and self._nursery is not None:
            self._probing = True
            self._nursery.start_soon(self._probe_model)

    async def _probe_model(self) -> None:
        # Until the model answers (this check, a warm-up or a local turn that reaches it):
        # one cheap server check per pause, the pause doubling up to its cap.
        try:
            while self.backend.relay_waits_for_model():
                await trio.sleep(self._retry_delay)
                self._retry_delay = min(self._retry_delay * 2, self._model_retry[1])
                if self.backend.relay_waits_for_model():
                    with trio.move_on_after(_CHECK_SECONDS):
                        await self.backend.check_model()
        finally:
            self._probing = False
        self.wake()

    async def _user_turn(self, text: str) -> bool:
        outcome = await self.backend.run_turn(text)
        _log.debug("turn ended: %s", outcome)
        return True

    async def _turn(self, run: Callable[[], Awaitable[bool]]) -> bool:
        self.stop_warmup()
        self.turn_active = self.terminal.turn_running = True
        self._queue_changed()
        self.status.set_state("thinking")
        self.terminal.invalidate()
        ran = False
        try:
            ran = await run()
            return ran
        finally:
            self.turn_active = self.terminal.turn_running = False
            if ran or self.status.busy:
                self.view.end_turn()
            if self._requeued:
                self._requeued = False
                self.view.notice("Your queued prompts are back in the input.")
            for notice in self._after_turn:
                self.view.notice(notice)
            self._after_turn.clear()
            if self.status.busy:
                self.status.set_state("ready")
            self._queue_changed()
            self.refresh_status()

    def refresh_status(self) -> None:
        self.status.model = self.backend.model
        self.status.title = self.backend.session_title
        self.status.relay, self.status.relay_queued = self.backend.relay_status()
        self.status.relay_held = self.backend.relay_waits_for_model()
        if self.status.relay_held:  # however it came to wait, something must look again
            self._start_probe()
        self.terminal.invalidate()

    # -- warm-up --------------------------------------------------------------------------
    async def start_warmup(self, check: bool = False) -> None:
        """Check the server (at start) and warm the model up unless disabled; a turn that
        starts meanwhile cancels this."""
        self.stop_warmup()
        with trio.CancelScope() as scope:
            self._warm_scope = scope
            if check:
                with trio.move_on_after(_CHECK_SECONDS):
                    problem = await self.backend.check_model()
                    if problem:
                        self.view.notice(problem, "error")
                        self.status.set_state("offline", problem)
                        self.terminal.invalidate()
                        return
            if not self._warmup_enabled:
                return
            self.status.warmup = "warming up"
            self.terminal.invalidate()
            problem = await self.backend.warmup()
            self.status.warmup = "warm-up failed" if problem else "warm"
            if problem:
                self.view.notice(f"warm-up failed: {problem}", "error")
                if not self.status.busy:
                    self.status.set_state("offline", problem)
            else:
                if self.status.state in ("offline", "error"):
                    self.status.set_state("ready")  # the server answered: it works again
                self.wake()  # the model answers: relayed messages waiting for it may run
            self.terminal.invalidate()
        if self._warm_scope is scope:
            self._warm_scope = None

    def stop_warmup(self) -> None:
        if self._warm_scope is not None:
            self._warm_scope.cancel()
            self._warm_scope = None
            if self.status.warmup == "warming up":
                self.status.warmup = ""

    def warm_again(self) -> None:
        """After a model or session change (idle only): warm the new model up."""
        self._wake.set()  # relayed messages that waited for the model may try this one
        if self._nursery is not None and not self.turn_active:
            self._nursery.start_soon(self.start_warmup, False)
