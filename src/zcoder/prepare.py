"""The set-up both modes share: where log records go, the session store, the session.

``prepare_run`` is the one place that decides which session a run continues and with which
model, so the interactive app and one-shot mode cannot disagree: a resumed session keeps its
own model unless ``-m NAME`` was given on this command line, which switches it to ``NAME``
(recorded in the session at once, as ``/model NAME`` does); the environment and the default
never override a resumed session. A new session starts with ``config.model``; once the
model server is chosen, ``take_server_choice`` gives it the model that choice settled on.

Synchronous: it runs before any event loop, in both modes. The server choice itself is not
here: it is asynchronous and belongs to the Trio part of each mode.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import attrs

from zcoder.config import Config
from zcoder.errors import ConfigError, SessionError
from zcoder.logfile import install_log
from zcoder.session.store import Session, SessionStore
from zcoder.text.visible import escape_controls

__all__ = ["PreparedRun", "prepare_or_say", "prepare_run", "take_server_choice"]


@attrs.frozen
class PreparedRun:
    """What a run starts with; the caller releases ``session`` (``store.release``)."""

    store: SessionStore
    session: Session
    resumed: bool


def prepare_run(config: Config, *, warnings_to: Path | None = None) -> PreparedRun:
    """Install the log, then open (``--resume``) or create the session, locked.

    The log: with ``--debug-log FILE`` everything at DEBUG goes to FILE; without it,
    warnings go to ``warnings_to`` (nowhere when None, or when that file cannot be opened:
    the run goes on and loses only its warnings). Log records never reach the terminal.

    Raises ``ConfigError`` (a usage error, exit 2) when ``--debug-log`` cannot be written,
    before any session was touched; ``SessionError`` (exit 1) when the session cannot be
    opened, created or, after ``-m`` switched its model, saved; nothing is left locked then.
    """
    _install_log(config, warnings_to)
    store = SessionStore(config.home, config.workspace, config.profile)
    if not config.resume:
        return PreparedRun(store, store.create(config.model), resumed=False)
    session = store.open(config.resume)
    if config.model_flag and session.model != config.model:
        session.model = config.model
        try:
            store.save(session)
        except SessionError:
            store.release(session)
            raise
    return PreparedRun(store, session, resumed=True)


def prepare_or_say(config: Config, *, warnings_to: Path | None = None) -> PreparedRun | int:
    """``prepare_run``, or the exit status after saying on stderr, in one line, why it could
    not: 2 for a bad setting (an unwritable ``--debug-log``), 1 for the session."""
    try:
        return prepare_run(config, warnings_to=warnings_to)
    except ConfigError as exc:
        sys.stderr.write(f"zcoder: {escape_controls(str(exc))}\n")
        return 2
    except SessionError as exc:
        sys.stderr.write(f"zcoder: {escape_controls(str(exc))}\n")
        return 1


def take_server_choice(run: PreparedRun, config: Config) -> None:
    """Once the server is chosen (``choose_server``): a new session takes ``config.model``
    as that choice settled it (an OpenAI-compatible server's own model when the user named
    none). A resumed session keeps the model ``prepare_run`` gave it."""
    if not run.resumed:
        run.session.model = config.model


def _install_log(config: Config, warnings_to: Path | None) -> None:
    if config.debug_log is not None:
        try:
            install_log(config.debug_log, level=logging.DEBUG)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError("--debug-log", f"cannot write {config.debug_log}: {reason}") from None
        return
    try:
        install_log(warnings_to, level=logging.WARNING)
    except OSError:  # a full runtime disk: the run goes on, its warnings are lost
        install_log(None, level=logging.WARNING)
