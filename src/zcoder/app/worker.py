"""The turn worker: the one owner of the work of the interactive app.

It alone holds the local queue (prompts and idle-only commands, in the order typed), decides
what runs next (``schedule.next_work``: one waiting relayed message before each local item),
runs one turn or command at a time in its own task (commands: ``app/idle.py``; ``/agents``
changes: ``relay_control``) and cancels it, and decides what Escape does to the relay. The UI
sends it intents over a memory channel and renders the events it sends back; the relay
reaches it only through ``wait_relay_change`` (the listener sets a flag, nothing more).

Escape stops the turn and hands the queued prompts back to the input (a queued command is
named as not run, never put beside them: sent with a prompt it would reach the model as
text); a local prompt that could not reach the model comes back to the input the same way,
with the prompts queued behind it, so that nothing is sent again unless the user sends it.
On a relayed turn Escape also *stops* relayed work: the relay still accepts and
acknowledges new messages, but none is claimed until ``/agents resume``. Refusing new
messages is ``/agents pause``. What may be claimed is the relay's ``Inbound`` machine's to
say (``relay_runnable``); the worker keeps no relay state.

A relayed message whose turn could not reach the model waits first in the queue; the
worker then checks the server again with a growing pause (``model_retry``: first and
longest, in seconds), so it runs once the model answers, without a busy loop.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio

from zcoder.app.schedule import QueueState, next_work
from zcoder.commands import ParsedCommand, interpret
from zcoder.errors import ZcoderError
from zcoder.ui.events import (
    CancelTurn,
    Command,
    Intent,
    Lines,
    Notice,
    Prompt,
    Queued,
    Refresh,
    RelayControl,
    RelayStopped,
    Returned,
    ServerState,
    TurnBegan,
    TurnEnded,
    WarmUpRequest,
    WarmUpState,
    WorkerEvent,
)

__all__ = ["MODEL_RETRY", "NOT_SENT", "RelayTurn", "TurnWorker", "WorkBackend"]

_log = logging.getLogger(__name__)
_CHECK_SECONDS = 5.0
MODEL_RETRY = (2.0, 60.0)
# What ``run_turn`` says of a local prompt whose every model request failed before a reply
# began: the model never saw it (the agent took it out of the history).
NOT_SENT = "not_sent"


@attrs.frozen
class RelayTurn:
    """A claimed relayed message: who sent it (``project``) and how to run it as a turn
    (``run`` returns whether anything ran)."""

    project: str
    run: Callable[[], Awaitable[bool]]


class WorkBackend(Protocol):
    """What the worker needs of the agent, the model client and the relay."""

    async def run_turn(self, text: str) -> str: ...
    def cancel_turn(self) -> bool: ...
    def set_busy(self, busy: bool) -> None: ...
    async def check_model(self) -> str: ...
    async def warmup(self) -> str: ...
    def claim_relay(self) -> RelayTurn | None: ...
    def relay_runnable(self) -> bool: ...
    def relay_waits_for_model(self) -> bool: ...
    def stop_relay(self) -> str: ...
    def relay_stopped(self) -> bool: ...
    def relay_control(self, action: str) -> list[str]: ...
    async def wait_relay_change(self) -> None: ...
    def sync_relay(self) -> None: ...


class CommandRunner(Protocol):
    """Runs an idle-only command (``app/idle.py``); whether to warm the model up again."""

    async def run(self, parsed: ParsedCommand, send: Callable[[WorkerEvent], None]) -> bool: ...


class TurnWorker:
    """``run`` it with ``nursery.start``; it ends only when cancelled."""

    def __init__(
        self,
        backend: WorkBackend,
        intents: trio.MemoryReceiveChannel[Intent],
        events: trio.MemorySendChannel[WorkerEvent],
        *,
        commands: CommandRunner,
        warmup: bool = True,
        model_retry: tuple[float, float] = MODEL_RETRY,
    ) -> None:
        self._backend = backend
        self._commands = commands
        self._intents = intents
        self._events = events
        self._warmup = warmup
        self._model_retry = model_retry
        self._retry_delay = model_retry[0]
        self._queue: list[Prompt | Command] = []
        self._wake = trio.Event()
        self._last_was_relay = False
        self._turn: str | None = None  # None, "local" or "relay"
        self._after_turn: list[str] = []
        self._warm_scope: trio.CancelScope | None = None
        # Asked of the worker's own long-lived tasks, so that no task keeps the nursery.
        self._warm_send, self._warm_requests = trio.open_memory_channel[bool](math.inf)
        self._probe_wanted = trio.Event()

    def _send(self, event: WorkerEvent) -> None:
        self._events.send_nowait(event)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_intents)
            nursery.start_soon(self._follow_relay)
            nursery.start_soon(self._warm_ups)
            nursery.start_soon(self._probes)
            self._warm_send.send_nowait(True)  # the start-up check, then the warm-up
            task_status.started()
            await self._work()

    # -- the order ------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            runnable = self._backend.relay_runnable()
            state = QueueState(len(self._queue), runnable, self._last_was_relay)
            choice = next_work(state)
            if choice is None:
                self._wake = trio.Event()
                await self._wake.wait()
            elif choice == "relay":
                await self._relayed()
            else:
                item = self._queue.pop(0)
                self._send(Queued(self._texts()))
                self._last_was_relay = False
                if isinstance(item, Prompt):
                    await self._run_turn("", functools.partial(self._user_turn, item.text))
                elif item.parsed.command.name == "compact":
                    # It asks the model, so it is stopped like a turn: Escape cancels it.
                    await self._run_turn("", functools.partial(self._command_turn, item))
                else:
                    await self._run_command(item)

    async def _relayed(self) -> None:
        claimed = self._backend.claim_relay()
        if claimed is None:  # another claimer was faster, or the claim failed
            return
        self._last_was_relay = True
        ran = await self._run_turn(claimed.project, claimed.run)
        if self._backend.relay_waits_for_model():
            self._start_probe()
        elif ran:
            self._retry_delay = self._model_retry[0]

    async def _user_turn(self, text: str) -> bool:
        outcome = await self._backend.run_turn(text)
        _log.debug("turn ended: %s", outcome)
        if outcome == NOT_SENT:
            what = "Your prompt is" if not self._queue else "Your prompt and the queued ones are"
            self._hand_back((text,), f"{what} back in the input (the model did not get it).")
        return True

    async def _command_turn(self, item: Command) -> bool:
        await self._run_command(item)
        return True

    async def _run_command(self, item: Command) -> None:
        # In this task, like a turn: nothing else starts meanwhile, so it cannot race one.
        if await self._commands.run(item.parsed, self._send):
            self._warm_again()  # another model or session: warm that one up

    async def _run_turn(self, relayed_from: str, run: Callable[[], Awaitable[bool]]) -> bool:
        self._stop_warmup()
        # The one place a turn starts and ends: the screen (TurnBegan, TurnEnded) and the
        # manifest (busy, ready) follow from here; nothing else says whether one runs.
        self._turn = "relay" if relayed_from else "local"
        self._backend.set_busy(True)
        self._send(TurnBegan(relayed_from))
        ran = False
        try:
            ran = await run()
            return ran
        finally:
            self._turn = None
            self._backend.set_busy(False)
            self._send(TurnEnded(ran))
            for notice in self._after_turn:
                self._send(Notice(notice))
            self._after_turn.clear()
            self._send(Refresh())

    # -- intents --------------------------------------------------------------------------
    async def _read_intents(self) -> None:
        async for intent in self._intents:
            if isinstance(intent, Prompt | Command):
                self._queue.append(intent)
                self._send(Queued(self._texts()))
                self._wake.set()
            elif isinstance(intent, CancelTurn):
                self._cancel()
            elif isinstance(intent, RelayControl):
                self._relay_control(intent.action)
            elif isinstance(intent, WarmUpRequest):
                self._warm_again()

    def _warm_again(self) -> None:
        self._wake.set()  # relayed messages that waited for the model may try it
        if self._turn is None:
            self._stop_warmup()  # a new model or session: warm that one up
            self._warm_send.send_nowait(False)

    def _texts(self) -> tuple[str, ...]:
        return tuple(item.text for item in self._queue)

    def _cancel(self) -> None:
        if self._turn is None or not self._backend.cancel_turn():
            return
        _log.debug("turn cancel requested")
        if self._queue:
            self._hand_back((), "Your queued prompts are back in the input.")
        if self._turn == "relay":
            # Like queued prompts, relayed messages must not start right after the user
            # stopped one; unlike /agents pause, senders are still answered ``accepted``.
            notice = self._backend.stop_relay()
            if notice:
                self._send(RelayStopped(True))
                self._after_turn.append(notice)

    def _hand_back(self, first: tuple[str, ...], notice: str) -> None:
        """Empty the queue: ``first`` and the queued prompts go back to the input, the
        queued commands are named as not run (after the turn: ``notice``, or the line on
        the commands alone when no prompt came back)."""
        prompts = tuple(_as_typed(i) for i in self._queue if isinstance(i, Prompt))
        commands = [i.text for i in self._queue if isinstance(i, Command)]
        self._queue.clear()
        self._send(Queued(()))
        if first or prompts:
            self._send(Returned((*first, *prompts)))
            self._after_turn.append(notice)
        if commands:
            them = "it" if len(commands) == 1 else "them"
            self._after_turn.append(
                f"Not run: {', '.join(commands)}; type {them} again to run {them}."
            )

    def _relay_control(self, action: str) -> None:
        try:
            lines = self._backend.relay_control(action)
        except ZcoderError as exc:
            self._send(Notice(str(exc), "error"))
        else:
            self._send(_shown(action, lines))
        self._send(RelayStopped(self._backend.relay_stopped()))
        self._wake.set()
        self._send(Refresh())

    # -- the relay and the model ----------------------------------------------------------
    def last_sync(self) -> None:
        """On the way out, after the relay's intake closed: take in what changed since the
        last look, so that what will not run is known whole."""
        self._backend.sync_relay()

    async def _follow_relay(self) -> None:
        while True:
            await self._backend.wait_relay_change()
            self._backend.sync_relay()
            self._wake.set()
            self._send(Refresh())
            if self._backend.relay_waits_for_model():
                self._start_probe()

    def _start_probe(self) -> None:
        self._probe_wanted.set()

    async def _probes(self) -> None:
        while True:
            await self._probe_wanted.wait()
            self._probe_wanted = trio.Event()  # a request from now on probes again
            await self._probe_model()

    async def _probe_model(self) -> None:
        # Until the model answers (this check, a warm-up or a local turn that reaches it):
        # one cheap server check per pause, the pause doubling up to its cap.
        while self._backend.relay_waits_for_model():
            await trio.sleep(self._retry_delay)
            self._retry_delay = min(self._retry_delay * 2, self._model_retry[1])
            if self._backend.relay_waits_for_model():
                with trio.move_on_after(_CHECK_SECONDS):
                    await self._backend.check_model()
        self._wake.set()
        self._send(Refresh())

    async def _warm_ups(self) -> None:
        async for check in self._warm_requests:
            await self._warm_up(check)

    async def _warm_up(self, check: bool) -> None:
        """Check the server (at start) and warm the model up unless disabled; a turn that
        starts meanwhile cancels this."""
        self._stop_warmup()
        with trio.CancelScope() as scope:
            self._warm_scope = scope
            if check:
                with trio.move_on_after(_CHECK_SECONDS):
                    problem = await self._backend.check_model()
                    if problem:
                        self._send(ServerState(problem))
                        return
            if not self._warmup:
                return
            self._send(WarmUpState("warming up"))
            problem = await self._backend.warmup()
            self._send(WarmUpState("warm-up failed", problem) if problem else WarmUpState("warm"))
            if not problem:
                self._wake.set()  # the model answers: relayed messages waiting for it may run
                self._send(Refresh())
        if self._warm_scope is scope:
            self._warm_scope = None

    def _stop_warmup(self) -> None:
        if self._warm_scope is not None:
            self._warm_scope.cancel()
            self._warm_scope = None
            self._send(WarmUpState(""))


def _shown(action: str, lines: list[str]) -> Notice | Lines:
    """What ``/agents ACTION`` shows: a block for a report or a listing, a line for a
    switch. A message's own lines (``show N``, ``inbox N``) hang under its heading."""
    verb, _, arg = action.partition(" ")
    if verb in ("", "inbox", "show"):
        whole = verb == "show" or (verb == "inbox" and bool(arg.strip()))
        return Lines(lines[0], tuple(lines[1:]), 2 if whole else None)
    return Notice(" ".join(lines))


def _as_typed(item: Prompt) -> str:
    """A queued prompt as the user typed it: one that reads as a command was typed with one
    more slash (``//new`` was sent as ``/new``), so it comes back with it."""
    return item.text if interpret(item.text) == item.text else "/" + item.text
