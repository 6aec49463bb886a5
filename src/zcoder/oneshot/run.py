"""One-shot mode (``zcoder -p TEXT``): one user turn in a plain ``trio.run``, no relay ever.

The answer streams to stdout; tool activity, thinking, notices and errors go to stderr;
approvals are asked on ``/dev/tty`` (denied when there is none). ``--output-format json``
or ``stream-json`` puts JSON records on stdout instead (``output``, ``records``), with the
same exit status; a failure after the command line was understood (exit 1, 130, 143)
still ends with a ``result`` record. Exit status: 0 when the
model answered or finished with ``complete``; 1 for a model or transport error, no model
server found (no host configured, none detected), a session that cannot be opened, and for
a turn that ended ``blocked``, at its step limit or stopped by loop detection (the task was
not done); 2 for a ``--debug-log`` file that cannot be written; 130 on Ctrl-C (SIGINT) and
143 on SIGTERM, after the history is made consistent and saved. The session and the log are
set up by ``prepare_run`` (through ``prepare_or_say``), as in the interactive app.

The configured MCP servers (and a trusted ``.mcp.json``'s) start as in the app
(``zcoder.mcp.link``), before the turn: it begins once each is ready or has failed (a failure
is one line on stderr), and they stop with the turn's nursery on every exit path. Their
calls ask on ``/dev/tty`` like commands (refused without a terminal) unless ``allow`` or
``--yes``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

import trio

from zcoder.agent.agent import Agent, TurnOutcome, TurnRequest
from zcoder.agent.connect import choose_server, make_client
from zcoder.checkpoint.tracker import Checkpoints
from zcoder.config import Config
from zcoder.errors import ConfigError, SessionError
from zcoder.mcp.link import McpLink
from zcoder.oneshot.output import Output, open_output
from zcoder.oneshot.terminal import TtyApprover
from zcoder.oneshot.usage import MeteredClient
from zcoder.prepare import PreparedRun, prepare_run, settle_resume, take_server_choice
from zcoder.session.store import Session, SessionStore
from zcoder.text.visible import escape_controls
from zcoder.tools.base import Tool
from zcoder.tools.registry import Toolbox, core_tools

if TYPE_CHECKING:
    from zcoder.localserver.process import ChildServer

__all__ = ["exit_status", "run_oneshot"]

_SIGNAL_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


def exit_status(outcome: TurnOutcome) -> int:
    # A reply cut at the output limit is not the whole answer: 1, as the other unfinished
    # turns are.
    return 0 if outcome.status in ("answered", "complete") else 1


def run_oneshot(config: Config, own: ChildServer | None = None) -> int:
    """Run the turn of ``config.prompt``; return the process exit status. ``own`` is the
    model server zcoder started for this run (``--gguf``), watched by its client."""
    output = open_output(config, sys.stdout, sys.stderr)
    try:
        prepared = _prepare(config, output)
        if isinstance(prepared, int):
            return prepared
        config, run = prepared
        try:
            return trio.run(_main, config, run, output, own)
        except KeyboardInterrupt:  # Ctrl-C before the turn could take it over
            return output.failed("", 130, "cancelled")
        finally:
            run.store.release(run.session)
    finally:
        _quiet_broken_stdout()


def _prepare(config: Config, output: Output) -> tuple[Config, PreparedRun] | int:
    """Settle ``--resume`` and open the session (as ``prepare_or_say`` does, but a session
    that cannot be opened is said in the run's output format); or the exit status."""
    try:
        # --resume ID brings back the session's workspace, profile, server and model
        config = settle_resume(config)
        return config, prepare_run(config)
    except ConfigError as exc:  # a usage error (--debug-log): one line, no JSON
        sys.stderr.write(f"zcoder: {escape_controls(str(exc))}\n")
        return 2
    except SessionError as exc:
        return output.failed(escape_controls(str(exc)), 1)


def _quiet_broken_stdout() -> None:
    """When the reader of stdout went away, stop the interpreter's last flush complaining."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


async def _main(config: Config, run: PreparedRun, output: Output, own: ChildServer | None) -> int:
    if config.resume_note:  # a resumed session opened in its own workspace, not here
        output.note(config.resume_note)
    if config.sandbox_note:  # the config file asked for the sandbox: commands ask instead
        output.note(config.sandbox_note)
    choice = await choose_server(config)
    if not choice.found:  # no session file is written before a model answered
        return output.failed(choice.line, 1)
    if choice.config.server_note:  # auto-detected, found elsewhere, the session's
        output.note(choice.line)
    config = choice.config
    take_server_choice(run, config)
    if not run.resumed:  # a session the app opens later is the app's (AgentBackend)
        run.session.oneshot = True
    output.started(config, run.session, resumed=run.resumed)
    ended: tuple[TurnOutcome, int] | None = None
    try:
        ended = await _run(config, run.store, run.session, output, own)
        return ended[1]
    finally:
        saved = run.store.is_saved(run.session.id)
        outcome, status = ended or (None, 1)
        output.ended(outcome, status, run.session.id if saved else None)


async def _run(
    config: Config, store: SessionStore, session: Session, output: Output, own: ChildServer | None
) -> tuple[TurnOutcome, int]:
    assert config.prompt is not None
    caught: list[int] = []
    core = core_tools()
    async with make_client(config) as made:
        # Not started again: the run ends with this turn, and the next run starts it.
        client = own.watch(made, restart=False) if own is not None else made
        agent = Agent(
            config=config,
            client=MeteredClient(client, output.counted),
            toolbox=Toolbox(core),
            approver=TtyApprover(sys.stderr),
            store=store,
            session=session,
            sink=output.sink,
            checkpoints=Checkpoints(config.home, config.workspace, config.checkpoints),
        )

        def offer(mcp_tools: list[Tool]) -> None:
            agent.set_toolbox(Toolbox([*core, *mcp_tools]))

        mcp = McpLink(config.home, config.workspace, offer)
        starting = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            await nursery.start(_stop_on_signals, agent, caught, starting)
            with starting:
                await mcp.start(nursery, output.note)
                await mcp.settled()
            if caught:  # Ctrl-C or SIGTERM while the servers started: no turn
                outcome = TurnOutcome("cancelled", reached_model=False)
            else:
                outcome = await agent.run_turn(TurnRequest("user", config.prompt))
            nursery.cancel_scope.cancel()
    status = _SIGNAL_STATUS[signal.Signals(caught[0])] if caught else exit_status(outcome)
    return outcome, status


async def _stop_on_signals(
    agent: Agent,
    caught: list[int],
    starting: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Ctrl-C or SIGTERM cancels the turn like Escape does; the turn then saves and ends.
    Before the turn, while the MCP servers start, it cancels ``starting``."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            caught.append(signum)
            starting.cancel()
            agent.cancel_turn()
