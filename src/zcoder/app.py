"""The interactive app: Trio as a guest on the asyncio loop that hosts prompt_toolkit.

The only module that knows both ``ui/`` and ``agent/``. ``run_app`` runs
``asyncio.run(host_main)``; ``host_main`` starts Trio in guest mode and installs the signal
handlers; ``trio_main`` opens the root nursery with the app, the controller (and the relay
when it runs here). Every exit (Ctrl-D, ``/quit``, SIGTERM, SIGHUP, a crash) cancels the
root scope: the app leaves raw mode, Trio ends, the session is saved and released; only
then does ``run_app`` print how to resume, and any traceback.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import outcome
import trio

from zcoder import __version__
from zcoder.agent.agent import Agent, TurnRequest
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.rounds import describe_model_error
from zcoder.approval import Approver
from zcoder.commands import complete
from zcoder.config import Config
from zcoder.conversation import Message, TranscriptEvent
from zcoder.errors import ModelError, SessionError, ZcoderError
from zcoder.live import LiveEvent, ToolUpdate, TurnSink
from zcoder.runtime import open_runtime_dir
from zcoder.session import Session, SessionStore, SessionSummary
from zcoder.tools.registry import Toolbox, core_tools
from zcoder.ui.backend import SessionRow
from zcoder.ui.controller import Controller
from zcoder.ui.history import PromptHistory
from zcoder.ui.render import render_event
from zcoder.ui.status import Status
from zcoder.ui.terminal import Terminal
from zcoder.ui.text import visible_text

__all__ = ["run_app"]

_log = logging.getLogger("zcoder")
_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGINT: "SIGINT"}
_REPLAY = 20
_CHECK_SECONDS = 5.0


class _OutputSink:
    """Adds the finished command's output to its tool card (the UI shows a few lines).

    The round answers a call in the history before it reports the card's final state, so
    the last history message is that call's result."""

    def __init__(self, inner: TurnSink, history: Callable[[], list[Message]]) -> None:
        self._inner = inner
        self._history = history

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, ToolUpdate) and event.name == "run_command" and not event.output:
            history = self._history()
            last = history[-1] if history else None
            if event.state in ("completed", "failed") and last and last.role == "tool":
                _, _, output = last.content.partition("\n")  # after "Exit code: N"
                event = attrs.evolve(event, output=output)
        self._inner.emit(event)


def _installed(name: str, models: list[str]) -> bool:
    return name in models or (":" not in name and f"{name}:latest" in models)


def _row(summary: SessionSummary, current: str) -> SessionRow:
    s = summary
    return SessionRow(s.id, s.title, s.model, s.updated_at, s.messages, s.problem, s.id == current)


def _current_row(s: Session) -> SessionRow:
    return SessionRow(s.id, s.title, s.model, s.updated_at, len(s.history), "", True)


class AgentBackend:
    """The controller's ``Backend`` over the agent, the session store and the client."""

    def __init__(
        self, config: Config, store: SessionStore, session: Session, client: OllamaClient
    ) -> None:
        self._config = config
        self._store = store
        self._client = client
        self._agent: Agent | None = None
        self._session = session
        self.models: list[str] = []
        self.session_ids: list[str] = []

    def attach(self, *, approver: Approver, sink: TurnSink) -> None:
        self._agent = Agent(
            config=self._config,
            client=self._client,
            toolbox=Toolbox(core_tools()),
            approver=approver,
            store=self._store,
            session=self._session,
            sink=_OutputSink(sink, lambda: self.agent.session.history),
        )
        if self._agent.model != self._config.model and not self._config.resume:
            self._agent.set_model(self._config.model)

    @property
    def agent(self) -> Agent:
        assert self._agent is not None, "attach() first"
        return self._agent

    @property
    def model(self) -> str:
        return self.agent.model if self._agent else self._session.model

    @property
    def session_id(self) -> str:
        return self.agent.session.id

    @property
    def session_title(self) -> str:
        return self.agent.session.title

    def session_events(self) -> list[TranscriptEvent]:
        return list(self._session.events)

    async def run_turn(self, text: str) -> str:
        return (await self.agent.run_turn(TurnRequest("user", text))).status

    def cancel_turn(self) -> bool:
        return self.agent.cancel_turn()

    def _describe(self, exc: ModelError) -> str:
        return describe_model_error(exc, self._config.host, self.model)

    async def check_model(self) -> str:
        try:
            self.models = await self.list_models()
        except ZcoderError as exc:
            return str(exc)
        if _installed(self.model, self.models):
            return ""
        return (
            f"model '{self.model}' is not installed on {self._config.host}: run "
            f"`ollama pull {self.model}`, or pick one with /model"
        )

    async def warmup(self) -> str:
        try:
            await self.agent.warmup()
        except ModelError as exc:
            return self._describe(exc)
        return ""

    async def list_models(self) -> list[str]:
        try:
            with trio.fail_after(_CHECK_SECONDS):
                models = [m.name for m in await self._client.list_models()]
        except trio.TooSlowError:
            raise ZcoderError(f"Ollama at {self._config.host} did not answer in time") from None
        except ModelError as exc:
            raise ZcoderError(self._describe(exc)) from None
        self.models = sorted(models)
        return self.models

    def set_model(self, name: str) -> None:
        self.agent.set_model(name)

    def _leave(self, new: Session) -> None:
        old = self.agent.session
        if old.history:
            self._save(old)
        self.agent.switch_session(new)
        self._store.release(old)

    def new_session(self) -> None:
        self._leave(self._store.create(self.model))

    def list_sessions(self) -> list[SessionRow]:
        current = self.agent.session
        rows = [_row(r, current.id) for r in self._store.list()]
        if not any(r.current for r in rows):
            rows.insert(0, _current_row(current))
        self.session_ids = [r.id for r in rows]
        return rows

    def switch_session(self, session_id: str) -> list[TranscriptEvent]:
        session = self._store.open(session_id)
        try:
            self._leave(session)
        except BaseException:
            self._store.release(session)
            raise
        return list(session.events)

    # -- the relay: wired by the relay issue (RelayService, relay tools, relayed turns) ----
    def relay_waiting(self) -> bool:
        return False

    async def run_relay_turn(self) -> bool:
        return False

    def relay_status(self) -> tuple[str, int]:
        return "", 0

    async def list_agents(self) -> list[str]:
        raise ZcoderError("the relay is not running in this instance")

    def relay_control(self, action: str) -> str:
        raise ZcoderError("the relay is not running in this instance")

    async def start_relay(self, root: trio.Nursery, status: Status, redraw: Any) -> str:
        """Start the relay service here when it is available (it is optional)."""
        return ""

    def _save(self, session: Session) -> bool:
        try:
            self._store.save(session)
        except SessionError as exc:
            _log.error("session %s not saved: %s", session.id, exc)
            return False
        return True

    def close(self) -> tuple[str, bool]:
        """Save (when there is anything to keep) and release; ``(id, saved)``."""
        session = self.agent.session if self._agent else self._session
        saved = bool(session.history) and self._save(session)
        self._store.release(session)
        return session.id, saved


@attrs.define
class _Exit:
    """How the run ended; filled in as it goes, read by ``run_app`` at the very end."""

    reason: str = "user"
    session_id: str = ""
    saved: bool = False
    crash: BaseException | None = None
    request: Any = None  # set once Trio is up: callable(reason) that asks for the exit
    pending: str = ""  # an exit asked for before Trio was ready


def run_app(config: Config) -> int:
    """Run the interactive app until the user leaves; return the exit status."""
    store = SessionStore(config.home, config.workspace, config.profile)
    try:
        session = store.open(config.resume) if config.resume else store.create(config.model)
    except SessionError as exc:
        sys.stderr.write(f"zcoder: {visible_text(str(exc))}\n")
        return 1
    state = _Exit(session_id=session.id)
    with open_runtime_dir() as runtime_dir:
        _setup_logging(config, runtime_dir)
        try:
            asyncio.run(_host_main(config, store, session, state))
        except BaseException as exc:  # the terminal is restored by now
            state.crash = state.crash or exc
    return _report(state)


def _report(state: _Exit) -> int:
    try:
        if state.crash is not None:
            sys.stderr.write("zcoder crashed; the terminal was restored. Traceback:\n")
            traceback.print_exception(state.crash, file=sys.stderr)
        if state.saved:
            sid = state.session_id
            sys.stdout.write(f"Session {sid} saved. Resume with: zcoder --resume {sid}\n")
        sys.stdout.flush()
    except OSError:
        pass  # the terminal hung up: the session is saved all the same
    if state.crash is not None:
        return 1
    signum = next((s for s, name in _SIGNALS.items() if name == state.reason), None)
    return 128 + int(signum) if signum is not None else 0


def _setup_logging(config: Config, runtime_dir: Path) -> None:
    # Nothing may write to the terminal behind the app's back: log to a file, always.
    path = config.debug_log or runtime_dir / "zcoder.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if config.debug_log else logging.WARNING)


async def _host_main(config: Config, store: SessionStore, session: Session, state: _Exit) -> None:
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
    for signum, name in _SIGNALS.items():
        loop.add_signal_handler(signum, ask_exit, name)
    try:
        trio.lowlevel.start_guest_run(
            _trio_main,
            config,
            store,
            session,
            state,
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
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)


async def _trio_main(config: Config, store: SessionStore, session: Session, state: _Exit) -> None:
    token = trio.lowlevel.current_trio_token()
    async with OllamaClient(config.host) as client:
        backend = AgentBackend(config, store, session, client)
        try:
            await _run_root(config, backend, token, state)
        finally:
            state.session_id, state.saved = backend.close()


async def _run_root(
    config: Config, backend: AgentBackend, token: trio.lowlevel.TrioToken, state: _Exit
) -> None:
    controller: Controller | None = None

    def post(event: Any) -> None:
        if controller is not None:
            token.run_sync_soon(controller.post, event)

    def completions(text: str) -> list[str]:
        numbers = [str(n) for n in range(1, len(backend.session_ids) + 1)]
        return complete(text, models=backend.models, sessions=[*numbers, *backend.session_ids])

    status = Status(model=backend.model, profile=config.profile)
    terminal = Terminal(
        status=status,
        post=post,
        schedule=token.run_sync_soon,
        complete=completions,
        history=PromptHistory(config.home / "history"),
    )
    controller = Controller(terminal, backend, warmup=config.warmup)
    backend.attach(approver=terminal.approval, sink=controller)
    _welcome(config, backend, terminal)
    async with trio.open_nursery() as root:
        state.request = lambda reason: token.run_sync_soon(controller.request_exit, reason)
        await root.start(_run_ui, terminal, root.cancel_scope)
        relay = await backend.start_relay(root, status, terminal.invalidate)
        if relay:
            _log.info("relay: %s", relay)
        if state.pending:
            controller.request_exit(state.pending)
        state.reason = await controller.run()
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


def _welcome(config: Config, backend: AgentBackend, terminal: Terminal) -> None:
    resumed = backend.session_events()
    lines = [
        f"zcoder {__version__} · model {backend.model} · host {config.host}",
        f"workspace {config.workspace} · profile {config.profile} · session "
        f"{backend.session_id}" + (" (resumed)" if config.resume else " (new)"),
    ]
    if config.relay_problem:
        lines.append(config.relay_problem)
    terminal.print_above([("class:system", visible_text(line) + "\n") for line in lines])
    for event in resumed[-_REPLAY:]:
        terminal.print_above(render_event(event))
    terminal.print_above(
        [("class:dim", "Type a message · /help for commands · Esc stops a turn · Ctrl-D quits\n")]
    )
