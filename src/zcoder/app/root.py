"""The app once its relay is up (``app.main`` imports this module after the manifest is
published, in a worker thread): the model server check, the model client, the app's parts
(``build_app``), the terminal and the controller, and the root nursery's tasks of
DESIGN.md section 1 (the UI, MCP servers, peer refresh, the worker, the controller).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from zcoder.agent.connect import ServerChoice, choose_server, make_client
from zcoder.app.backend import AgentBackend
from zcoder.app.core import AppCore, build_app
from zcoder.app.exit import Exit
from zcoder.app.relay.link import RelayLink
from zcoder.app.welcome import welcome
from zcoder.approval.questions import Answer, ApprovalRequest, Approver
from zcoder.commands import complete
from zcoder.config import Config
from zcoder.sandbox.settle import status_label
from zcoder.session.store import Session, SessionStore
from zcoder.ui.agents_text import unavailable_line
from zcoder.ui.controller import Controller
from zcoder.ui.events import ExitRequest, UiEvent
from zcoder.ui.history import PromptHistory
from zcoder.ui.status import Status
from zcoder.ui.terminal import Terminal

if TYPE_CHECKING:
    from zcoder.localserver.process import ChildServer

__all__ = ["run_after_relay"]

_log = logging.getLogger("zcoder")


async def run_after_relay(
    config: Config,
    store: SessionStore,
    session: Session,
    state: Exit,
    runtime_dir: Path,
    own: ChildServer | None,
    relay: RelayLink,
    problem: str,
) -> None:
    """The model server check, then the app over the client (``own``, the server zcoder
    started, watches it), until the user leaves; ``state`` learns how the run ended.
    ``relay`` runs already; ``problem`` says why it is unavailable."""
    approver = _LateApprover()
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


class _LateApprover:
    """The terminal's approval line, which is made after the relay listens (with the UI
    toolkit); nothing asks before it is there: turns start with the worker, after it."""

    def __init__(self) -> None:
        self.inner: Approver | None = None

    async def ask(self, request: ApprovalRequest) -> Answer:
        assert self.inner is not None, "asked before the terminal was made"
        return await self.inner.ask(request)


def _make_screen(
    config: Config, core: AppCore, approver: _LateApprover
) -> tuple[Terminal, Controller]:
    """The terminal (its approval line answers ``approver`` from now on) and the controller
    over it."""
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
