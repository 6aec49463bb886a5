"""``prepare_run``: the one set-up of both modes (log, session store, session, its model)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest

from zcoder.config import Config, RawOptions, load_config
from zcoder.conversation import Message
from zcoder.errors import ConfigError, SessionError, SessionLocked, SessionNotFound
from zcoder.logfile import QuietFileHandler
from zcoder.prepare import PreparedRun, prepare_run, take_server_choice
from zcoder.session.store import SessionStore

OLD, NEW = "old-model:1b", "new-model:7b"


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _config(workspace: Path, env: Mapping[str, str] | None = None, **flags: str) -> Config:
    opts = RawOptions(workspace=str(workspace), **flags)  # type: ignore[arg-type]
    return load_config(opts, {"ZCODER_HOME": str(workspace.parent / "zh"), **(env or {})})


def _saved_session(workspace: Path, model: str) -> str:
    """A session a model answered in, saved with ``model`` and released."""
    run = prepare_run(_config(workspace, model=model))
    run.session.history += [Message("user", "hi"), Message("assistant", "hello")]
    assert run.store.save(run.session)
    run.store.release(run.session)
    return run.session.id


def _reopened_model(config: Config, sid: str) -> str:
    store = SessionStore(config.home, config.workspace, config.profile)
    try:
        return store.open(sid).model
    finally:
        store.close()


def _close(run: PreparedRun) -> None:
    run.store.release(run.session)


def test_a_new_session_has_the_configured_model(workspace: Path) -> None:
    run = prepare_run(_config(workspace, model=NEW))
    _close(run)
    assert not run.resumed and run.session.model == NEW
    assert not run.store.is_saved(run.session.id)  # written once a model answered


def test_resume_keeps_the_sessions_model_without_m(workspace: Path) -> None:
    sid = _saved_session(workspace, OLD)
    config = _config(workspace, {"ZCODER_MODEL": NEW}, resume=sid)
    run = prepare_run(config)
    _close(run)
    assert run.resumed and run.session.model == OLD  # the environment does not override
    assert _reopened_model(config, sid) == OLD


def test_m_with_resume_switches_the_session_and_records_it(workspace: Path) -> None:
    sid = _saved_session(workspace, OLD)
    config = _config(workspace, model=NEW, resume=sid)
    run = prepare_run(config)
    _close(run)
    assert run.session.model == NEW and run.session.history[-1].content == "hello"
    assert _reopened_model(config, sid) == NEW  # saved at once, as /model does


def test_a_switch_that_cannot_be_saved_fails_and_releases_the_session(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = _saved_session(workspace, OLD)
    config = _config(workspace, model=NEW, resume=sid)

    def full_disk(self: SessionStore, session: object) -> bool:
        raise SessionError("session cannot be saved: No space left on device")

    monkeypatch.setattr(SessionStore, "save", full_disk)
    with pytest.raises(SessionError, match="No space left"):
        prepare_run(config)
    monkeypatch.undo()
    assert _reopened_model(config, sid) == OLD  # not locked, not changed


def test_an_unknown_session_is_refused(workspace: Path) -> None:
    with pytest.raises(SessionNotFound, match="no saved session nope"):
        prepare_run(_config(workspace, resume="nope"))


def test_a_session_open_elsewhere_is_refused(workspace: Path) -> None:
    sid = _saved_session(workspace, OLD)
    first = prepare_run(_config(workspace, resume=sid))
    try:
        with pytest.raises(SessionLocked):
            prepare_run(_config(workspace, model=NEW, resume=sid))
    finally:
        _close(first)
    assert _reopened_model(_config(workspace), sid) == OLD


def test_take_server_choice_moves_only_a_new_session(workspace: Path) -> None:
    sid = _saved_session(workspace, OLD)
    chosen = attrs.evolve(_config(workspace), model="served-by-the-server")
    new = prepare_run(_config(workspace))
    resumed = prepare_run(_config(workspace, resume=sid))
    take_server_choice(new, chosen)
    take_server_choice(resumed, chosen)
    _close(new)
    _close(resumed)
    assert (new.session.model, resumed.session.model) == ("served-by-the-server", OLD)


def test_the_log_goes_to_the_debug_file_or_the_warnings_file(
    workspace: Path, tmp_path: Path
) -> None:
    debug, warnings = tmp_path / "debug.log", tmp_path / "warnings.log"
    _close(prepare_run(_config(workspace, debug_log=str(debug)), warnings_to=warnings))
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, QuietFileHandler) and Path(handler.baseFilename) == debug
    assert logging.getLogger().level == logging.DEBUG
    _close(prepare_run(_config(workspace), warnings_to=warnings))
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, QuietFileHandler) and Path(handler.baseFilename) == warnings
    assert logging.getLogger().level == logging.WARNING
    _close(prepare_run(_config(workspace), warnings_to=tmp_path / "no" / "such" / "dir.log"))
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.NullHandler)  # the run goes on without its warnings


def test_an_unwritable_debug_log_is_a_usage_error_before_any_session(
    workspace: Path, tmp_path: Path
) -> None:
    config = _config(workspace, debug_log=str(tmp_path / "missing" / "x.log"))
    with pytest.raises(ConfigError, match=r"^--debug-log: cannot write .*x\.log: No such file"):
        prepare_run(config)
    assert not (config.home / "sessions").exists()
