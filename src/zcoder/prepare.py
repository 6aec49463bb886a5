"""The set-up both modes share: where log records go, the session store, the session.

``prepare_run`` is the one place that decides which session a run continues and with which
model, so the interactive app and one-shot mode cannot disagree: a resumed session keeps its
own model unless ``-m NAME`` was given on this command line, which switches it to ``NAME``
(recorded in the session at once, as ``/model NAME`` does); the environment and the default
never override a resumed session. A new session starts with ``config.model``; once the
model server is chosen, ``take_server_choice`` gives it the model that choice settled on.

``settle_resume`` runs before both (from ``cli.main``): a ``--resume ID`` brings back what
the session was saved with, where no flag or environment variable says otherwise: its
workspace and profile (an id saved for another workspace is opened there), its model
server (host and API; for a server zcoder started, its model file, ``--gguf``) and its model.

Synchronous: it runs before any event loop, in both modes. The server choice itself is not
here: it is asynchronous and belongs to the Trio part of each mode.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path

import attrs

from zcoder.config import APIS, PROFILES, Config, normalize_host
from zcoder.errors import ConfigError, SessionError, SessionNotFound
from zcoder.logfile import install_log
from zcoder.relay.names import agent_name_problem
from zcoder.session.store import Session, SessionStore, find_session, is_session_id
from zcoder.text.visible import escape_controls

__all__ = [
    "PreparedRun",
    "prepare_or_say",
    "prepare_run",
    "settle_resume",
    "take_server_choice",
    "with_gguf",
]


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


def settle_resume(config: Config) -> Config:
    """``config`` with what a ``--resume ID`` session brings back where nothing was given.

    The session is looked for in this workspace and profile, then (for what a flag or an
    environment variable did not fix) in the others: found in one, the run moves there
    (``resume_note`` says so). Raises ``SessionNotFound`` when the id is saved only for a
    workspace or profile the flags exclude, saying which and the command that opens it.
    An id saved nowhere raises ``SessionNotFound`` too; a damaged file is left for
    ``prepare_run`` to report.
    """
    if not config.resume:
        return config
    sid = config.resume
    store = SessionStore(config.home, config.workspace, config.profile)
    if not store.is_saved(sid):
        config = _move_to_session(config, sid)
        store = SessionStore(config.home, config.workspace, config.profile)
    try:
        session = store.peek(sid)
    except SessionError:
        return config  # prepare_run's open says what is wrong
    return _with_session_server(config, session)


def _with_session_gguf(config: Config, sid: str, gguf: Path) -> Config:
    """A session whose server zcoder started for a model file: the same file again, as
    ``--gguf`` gives it (the saved address died with that run). A file that is gone is
    said, and a server is looked for as when none was given."""
    if gguf.is_file():
        return with_gguf(config, gguf)
    gone = (
        f"session {sid} ran on llama.cpp started for {gguf}, which is gone: looking for a "
        "running server instead (--gguf FILE starts one for another file)"
    )
    note = f"{config.resume_note}; {gone}" if config.resume_note else gone
    return attrs.evolve(config, resume_note=note)


def with_gguf(config: Config, gguf: Path) -> Config:
    """``config`` as ``--gguf FILE`` would make it (its server is started by the caller)."""
    return attrs.evolve(
        config,
        gguf=gguf,
        autodetect=False,
        api="openai",
        api_given=True,
        host="",
        model_default=False,
    )


def _move_to_session(config: Config, sid: str) -> Config:
    scopes = find_session(config.home, sid)
    fits = [
        (w, p)
        for w, p in scopes
        if (not config.workspace_given or w == str(config.workspace))
        and (not config.profile_given or p == config.profile)
        and p in PROFILES
    ]
    if len(fits) == 1 and Path(fits[0][0]).is_dir():
        workspace, profile = fits[0]
        if profile == "sysadmin" and config.command_policy in ("allow", "sandbox"):
            flag = "--yes" if config.command_policy == "allow" else "--sandbox"
            raise SessionNotFound(
                f"session {sid} belongs to the sysadmin profile, which refuses {flag} "
                f"(and ZCODER_COMMAND_POLICY={config.command_policy}): every command asks there"
            )
        note = f"session {sid} belongs to workspace {workspace} ({profile} profile): opened there"
        return attrs.evolve(
            config,
            workspace=Path(workspace),
            profile=profile,
            resume_note=note if fits[0] != (str(config.workspace), config.profile) else "",
        )
    if not scopes and is_session_id(sid):
        # Saved nowhere: said whole here (prepare_run's open would name only this
        # workspace, as if the others had not been looked in).
        raise SessionNotFound(f"no saved session {sid} in any workspace or profile")
    if not scopes:
        return config  # not an id at all: prepare_run's open says what one is
    raise SessionNotFound(_elsewhere(sid, scopes))


def _elsewhere(sid: str, scopes: list[tuple[str, str]]) -> str:
    """Where the id is saved and how to open it there."""

    def command(workspace: str, profile: str) -> str:
        flags = f"-w {shlex.quote(workspace)}"
        flags += f" --profile {profile}" if profile != "coding" else ""
        return f"zcoder {flags} --resume {sid}"

    gone = [w for w, _ in scopes if not Path(w).is_dir()]
    if len(scopes) == 1:
        workspace, profile = scopes[0]
        if gone:
            return (
                f"session {sid} belongs to workspace {workspace} ({profile} profile), "
                "which is no longer a directory"
            )
        return (
            f"session {sid} belongs to workspace {workspace} ({profile} profile): "
            f"run {command(workspace, profile)}"
        )
    places = "; ".join(f"{command(w, p)}" for w, p in scopes)
    return f"session {sid} is saved for several workspaces or profiles: run one of {places}"


def _with_session_server(config: Config, session: Session) -> Config:
    """The session's model and agent name, and its server where no host (nor another API)
    was given."""
    if not config.model_flag:
        config = attrs.evolve(config, model=session.model, model_default=False)
    name = session.agent_name
    if not config.agent_name and name and not agent_name_problem(name):  # flag or env wins
        config = attrs.evolve(config, agent_name=name)
    server = session.server
    if server is None or not config.autodetect or server.api not in APIS:
        return config
    if config.api_given and config.api != server.api:
        return config
    if server.gguf:
        return _with_session_gguf(config, session.id, Path(server.gguf))
    try:
        host = normalize_host(server.host)
    except ConfigError:
        return config
    api = server.api
    if api == "openai" and not host.endswith("/v1"):
        host += "/v1"
    return attrs.evolve(
        config, host=host, api=api, autodetect=False, server_note="the session's server"
    )
