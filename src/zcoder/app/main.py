"""The interactive app: Trio as a guest on the asyncio loop that hosts prompt_toolkit.

``run_app`` runs ``asyncio.run(host_main)``; ``host_main`` starts Trio in guest mode and
installs the signal handlers; ``trio_main`` makes the channels, the terminal, the backend,
the worker and the controller (each once, complete), then opens the root nursery with the
app, the relay (when it runs here), the worker and the controller. Every exit (Ctrl-D,
``/quit``, SIGTERM, SIGHUP, a crash) cancels the root scope: the app leaves raw mode, Trio
ends, the session is saved and released; only then does ``run_app`` print
(``app/exit.py``) how to resume, any traceback, and the accepted relayed messages that had
not run (dropped with the spool; read just before the relay shuts down).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import outcome
import trio

from zcoder.agent.connect import ServerChoice, choose_server, make_client
from zcoder.agent.model import ModelClient
from zcoder.app.backend import AgentBackend
from zcoder.app.exit import SIGNALS, Exit, report
from zcoder.app.idle import IdleCommands
from zcoder.app.relay.link import RelayLink
from zcoder.app.welcome import welcome
from zcoder.app.worker import TurnWorker
from zcoder.approval.questions import Answer, ApprovalRequest, Approver
from zcoder.commands import complete
from zcoder.config import Config
from zcoder.live import LiveEvent
from zcoder.prepare import prepare_or_say
from zcoder.runtime import open_runtime_dir
from zcoder.sandbox.settle import status_label
from zcoder.session.store import Session, SessionStore
from zcoder.ui.agents_text import unavailable_line
from zcoder.ui.events import ExitRequest, Intent, Show, UiEvent, WorkerEvent

if TYPE_CHECKING:
    from zcoder.ui.controller import Controller
    from zcoder.ui.terminal import Terminal

if TYPE_CHECKING:
    from zcoder.localserver.process import ChildServer

__all__ = ["AppCore", "build_app", "run_app"]

_log = logging.getLogger("zcoder")
# The screen's modules (prompt_toolkit, Pygments' token table, the controller): imported
# once the relay's manifest is published, in a worker thread, so that other instances find
# this one and get their pongs while the first screen is still being made.
_SCREEN_MODULES = (
    "zcoder.ui.controller",
    "zcoder.ui.history",
    "zcoder.ui.render",
    "zcoder.ui.status",
    "zcoder.ui.terminal",
    "zcoder.ui.wrap",
)


def run_app(config: Config, own: ChildServer | None = None) -> int:
    """Run the interactive app until the user leaves; return the exit status. ``own`` is
    the model server zcoder started for this run (``--gguf``), watched by its client."""
    with open_runtime_dir() as runtime_dir:
        run = prepare_or_say(config, warnings_to=runtime_dir / "zcoder.log")
        if isinstance(run, int):
            return run
        state = Exit(session_id=run.session.id)
        try:
            asyncio.run(_host_main(config, run.store, run.session, state, runtime_dir, own))
        except BaseException as exc:  # the terminal is restored by now
            state.crash = state.crash or exc
    return report(state)


async def _host_main(
    config: Config,
    store: SessionStore,
    session: Session,
    state: Exit,
    runtime_dir: Path,
    own: ChildServer | None,
) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

    def ask_exit(reason: str) -> None:
        if state.request is not None:
            state.request(reason)
        else:
            state.pending = state.pending or reason

    def on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        _log.error("host loop error: %s", context.get("message"), exc_info=exc)
        if isinstance(exc, BaseException) and state.crash is None:
            state.crash = exc
            ask_exit("crash")

    loop.set_exception_handler(on_loop_error)
    # Before Trio starts, so Trio leaves SIGINT to us (prompt_toolkit turns it into a key).
    for signum, name in SIGNALS.items():
        loop.add_signal_handler(signum, ask_exit, name)
    try:
        trio.lowlevel.start_guest_run(
            _trio_main,
            config,
            store,
            session,
            state,
            runtime_dir,
            own,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=done.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )
        while True:
            try:
                result = await asyncio.shield(done)
                break
            except asyncio.CancelledError:  # asyncio.run's own Ctrl-C handling
                ask_exit("SIGINT")
        result.unwrap()
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)


class _ChannelSink:
    """The agent's ``TurnSink``: its live events go to the UI as worker events, in order."""

    def __init__(self, events: trio.MemorySendChannel[WorkerEvent]) -> None:
        self._events = events

    def emit(self, event: LiveEvent) -> None:
        self._events.send_nowait(Show(event))


@attrs.frozen
class AppCore:
    """What ``build_app`` makes: the backend (the UI's), the worker (over the backend's
    runner), the worker's intents to send and its events to read."""

    backend: AgentBackend
    worker: TurnWorker
    intents: trio.MemorySendChannel[Intent]
    events: trio.MemoryReceiveChannel[WorkerEvent]


def build_app(
    config: Config,
    store: SessionStore,
    session: Session,
    client: ModelClient,
    runtime_dir: Path | None,
    *,
    approver: Approver,
    relay: RelayLink | None = None,
) -> AppCore:
    """The app's parts below the terminal, each made once, complete: the channels (intents
    -> worker, worker events -> whoever draws them), the backend over the agent, the
    session store, the model client and the relay, and the worker. The same wiring for
    the app and for the tests of the worker."""
    intents_send, intents = trio.open_memory_channel[Intent](math.inf)
    events_send, events = trio.open_memory_channel[WorkerEvent](math.inf)
    backend = AgentBackend(
        config,
        store,
        session,
        client,
        runtime_dir,
        approver=approver,
        sink=_ChannelSink(events_send),
        relay=relay,
    )
    worker = TurnWorker(
        backend.runner,
        intents,
        events_send,
        commands=IdleCommands(backend),
        warmup=config.warmup,
    )
    return AppCore(backend, worker, intents_send, events)


async def _trio_main(
    config: Config,
    store: SessionStore,
    session: Session,
    state: Exit,
    runtime_dir: Path,
    own: ChildServer | None,
) -> None:
    approver = _LateApprover()
    relay = RelayLink(config, runtime_dir)  # the relay's settings: no server check needed
    async with trio.open_nursery() as root:
        # The relay first, before the model server check, so that other instances find
        # this one as soon as it can take messages (they wait, accepted, until the worker
        # runs); the manifest names the model the session will use, and says the served
        # one once the check has settled it. Its shut-down (manifest first) runs when the
        # root scope is cancelled, whatever the exit, after the app's own tasks have ended
        # and the session is saved.
        problem = await relay.start(
            root, model=_starting_model(config, session), session_id=session.id
        )
        try:
            choice = await choose_server(config)
            config = choice.config
            async with make_client(config) as made:
                client = own.watch(made) if own is not None else made
                core = build_app(
                    config, store, session, client, runtime_dir, approver=approver, relay=relay
                )
                relay.refresh(model=core.backend.model)
                try:
                    await _run_root(config, core, approver, state, problem, choice)
                finally:
                    state.session_id, state.saved = core.backend.close()
                    state.resume = config.resume_command(state.session_id)
        finally:
            root.cancel_scope.cancel()


def _starting_model(config: Config, session: Session) -> str:
    """The model a turn will ask for, as the backend settles it (``AgentBackend``): a
    resumed session's own, else the configured one."""
    return session.model if config.resume and session.model else config.model


class _LateApprover:
    """The terminal's approval line, which is made after the relay listens (with the UI
    toolkit); nothing asks before it is there: turns start with the worker, after it."""

    def __init__(self) -> None:
        self.inner: Approver | None = None

    async def ask(self, request: ApprovalRequest) -> Answer:
        assert self.inner is not None, "asked before the terminal was made"
        return await self.inner.ask(request)


def _import_screen() -> None:
    for name in _SCREEN_MODULES:
        importlib.import_module(name)


def _make_screen(
    config: Config, core: AppCore, approver: _LateApprover
) -> tuple[Terminal, Controller]:
    """The terminal (its approval line answers ``approver`` from now on) and the controller
    over it; the screen's modules are imported by now."""
    from zcoder.ui.controller import Controller
    from zcoder.ui.history import PromptHistory
    from zcoder.ui.status import Status
    from zcoder.ui.terminal import Terminal

    token = trio.lowlevel.current_trio_token()
    keys_send, keys = trio.open_memory_channel[UiEvent](math.inf)
    backend = core.backend
    terminal = Terminal(
        status=Status(model=backend.model, profile=config.profile, sandbox=status_label(config)),
        post=lambda event: token.run_sync_soon(keys_send.send_nowait, event),
        schedule=token.run_sync_soon,
        complete=lambda text: _completions(backend, text, token.run_sync_soon),
        describe=lambda option: _described(backend, option),
        history=PromptHistory(config.home / "history"),
        approval_guard=config.approval_guard,
    )
    approver.inner = terminal.approval
    return terminal, Controller(terminal, backend, keys, core.intents, core.events)


def _described(backend: AgentBackend, option: str) -> str:
    """What the Tab menu shows beside a ``/send`` target: label, pid and workspace."""
    command, _, target = option.partition(" ")
    return backend.send_target_descriptions().get(target, "") if command == "/send" else ""


def _completions(
    backend: AgentBackend, text: str, schedule: Callable[[Callable[[], None]], object]
) -> list[str]:
    numbers = [str(n) for n in range(1, len(backend.session_ids) + 1)]
    if text.startswith("/send "):  # offer the last discovery now; refresh it for next Tab
        schedule(backend.peer_refresh.ask)
    return complete(
        text,
        models=backend.server.models,
        sessions=[*numbers, *backend.session_ids],
        agents=backend.send_targets(),
    )


async def _run_root(
    config: Config,
    core: AppCore,
    approver: _LateApprover,
    state: Exit,
    problem: str,
    choice: ServerChoice | None = None,
) -> None:
    """The app's tasks inside the root nursery of DESIGN.md section 1 (whose relay runs
    already, ``problem`` saying why it is unavailable): the UI, the worker and the
    controller; cancelling it is the one way out of the app."""
    backend = core.backend
    async with trio.open_nursery() as root:
        # Until the terminal is made, an exit asked for waits in ``state.pending``.
        await trio.to_thread.run_sync(_import_screen)
        terminal, controller = _make_screen(config, core, approver)
        state.request = lambda reason: terminal.post(ExitRequest(reason))
        welcome(config, backend, terminal, choice)
        await root.start(_run_ui, terminal, root.cancel_scope)
        if problem:
            _log.warning("relay unavailable: %s", problem)
            controller.view.notice(unavailable_line(problem))
        # MCP servers: each in its own task of the root nursery, stopped with it.
        await backend.mcp.start(root, controller.view.notice)
        root.start_soon(backend.peer_refresh.run)
        root.start_soon(backend.watch_receivers)
        backend.peer_refresh.ask()  # so that the first Tab after /send has peers to offer
        await root.start(core.worker.run)
        if state.pending:
            controller.request_exit(state.pending)
        try:
            state.reason = await controller.run()
        finally:
            # Before the root scope's cancel reaches the relay, which removes the spool;
            # intake closed first, so that no message is accepted or claimed after the list.
            backend.relay.close_intake()
            core.worker.last_sync()  # what came since the worker last looked is listed too
            state.dropped = backend.inbox.unrun()
            state.told = await backend.relay_farewell()  # bounded, shielded: ``dropped``
        root.cancel_scope.cancel()


async def _run_ui(
    terminal: Terminal,
    root: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The app; if it ends on its own (input closed), the whole run ends with it."""
    try:
        await terminal.run(task_status=task_status)
    finally:
        root.cancel()
