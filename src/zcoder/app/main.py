"""The interactive app: Trio as a guest on the asyncio loop that hosts prompt_toolkit.

``run_app`` runs ``asyncio.run(host_main)``; ``host_main`` starts Trio in guest mode and
installs the signal handlers; ``trio_main`` opens the root nursery and starts the relay
in it (when it runs here) with no more of the app imported than the relay needs, then
imports the rest (``app/root.py``, in a worker thread: the listener answers meanwhile),
which checks the model server and makes the channels, the backend, the worker, the
terminal and the controller (each once, complete) and runs them. Every exit (Ctrl-D,
``/quit``, SIGTERM, SIGHUP, a crash) cancels the root scope: the app leaves raw mode, Trio
ends, the session is saved and released; only then does ``run_app`` print
(``app/exit.py``) how to resume, any traceback, and the accepted relayed messages that had
not run (dropped with the spool; read just before the relay shuts down).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import outcome
import trio

from zcoder.app.exit import SIGNALS, Exit, report
from zcoder.app.relay.link import RelayLink
from zcoder.config import Config
from zcoder.prepare import prepare_or_say
from zcoder.runtime import open_runtime_dir
from zcoder.session.store import Session, SessionStore

if TYPE_CHECKING:
    from zcoder.localserver.process import ChildServer

__all__ = ["run_app"]

_log = logging.getLogger("zcoder")
# What runs once the relay is up (``app/root.py``: the model clients, the agent, the
# screen): imported after the manifest is published, in a worker thread, so that other
# instances find this one and get their pongs while the rest is still being loaded.
_AFTER_THE_RELAY = "zcoder.app.root"


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


async def _trio_main(
    config: Config,
    store: SessionStore,
    session: Session,
    state: Exit,
    runtime_dir: Path,
    own: ChildServer | None,
) -> None:
    relay = RelayLink(config, runtime_dir)  # the relay's settings: no server check needed
    async with trio.open_nursery() as root:
        # The relay first, before the rest is even imported and before the model server
        # check, so that other instances find this one as soon as it can take messages
        # (they wait, accepted, until the worker runs); the manifest names the model the
        # session will use, and says the served one once the check has settled it. Its
        # shut-down (manifest first) runs when the root scope is cancelled, whatever the
        # exit, after the app's own tasks have ended and the session is saved.
        problem = await relay.start(
            root, model=_starting_model(config, session), session_id=session.id
        )
        try:
            await trio.to_thread.run_sync(_import_the_rest)
            from zcoder.app.root import run_after_relay

            await run_after_relay(config, store, session, state, runtime_dir, own, relay, problem)
        finally:
            root.cancel_scope.cancel()


def _starting_model(config: Config, session: Session) -> str:
    """The model a turn will ask for, as the backend settles it (``AgentBackend``): a
    resumed session's own, else the configured one."""
    return session.model if config.resume and session.model else config.model


def _import_the_rest() -> None:
    importlib.import_module(_AFTER_THE_RELAY)
