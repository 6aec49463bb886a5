"""``settle_resume``: ``--resume ID`` brings back the session's workspace, profile, server
and model wherever no flag or environment variable says otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs
import pytest

from zcoder.config import Config, RawOptions, load_config
from zcoder.conversation import Message
from zcoder.errors import SessionNotFound
from zcoder.prepare import settle_resume
from zcoder.session.data import SessionServer
from zcoder.session.store import SessionStore, find_session

V1 = "http://127.0.0.1:18431/v1"
LLAMA = SessionServer(V1, "openai")


def _config(
    tmp_path: Path, cwd: Path, env: Mapping[str, str] | None = None, **flags: str
) -> Config:
    opts = RawOptions(**flags)  # type: ignore[arg-type]
    full = {"ZCODER_HOME": str(tmp_path / "zh"), "ZCODER_WORKSPACE": str(cwd), **(env or {})}
    config = load_config(opts, full)
    # ZCODER_WORKSPACE stands for the current directory here: not "given" by the user.
    return config if "workspace" in flags else _as_cwd(config)


def _as_cwd(config: Config) -> Config:
    return attrs.evolve(config, workspace_given=False)


def _saved(
    tmp_path: Path,
    workspace: Path,
    *,
    profile: str = "coding",
    server: SessionServer | None = LLAMA,
    agent_name: str = "",
) -> str:
    store = SessionStore(tmp_path / "zh", workspace, profile)
    session = store.create("smollm2:135m")
    session.history += [Message("user", "hi"), Message("assistant", "hello")]
    session.server = server
    session.agent_name = agent_name
    assert store.save(session)
    store.close()
    return session.id


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    ws.mkdir()
    elsewhere.mkdir()
    return ws, elsewhere


def test_the_id_alone_brings_back_workspace_server_and_model(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, elsewhere = dirs
    sid = _saved(tmp_path, ws)
    got = settle_resume(_config(tmp_path, elsewhere, resume=sid))
    assert got.workspace == ws and got.profile == "coding"
    assert (got.host, got.api, got.autodetect) == (V1, "openai", False)
    assert got.server_note == "the session's server"
    assert got.model == "smollm2:135m"
    assert (
        got.resume_note == f"session {sid} belongs to workspace {ws} (coding profile): opened there"
    )


def test_in_its_own_workspace_nothing_is_noted(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws)
    got = settle_resume(_config(tmp_path, ws, resume=sid))
    assert got.workspace == ws and got.resume_note == "" and got.host == V1


@pytest.mark.parametrize(
    ("flags", "env", "host"),
    [
        ({"host": "127.0.0.1:9"}, {}, "http://127.0.0.1:9"),
        ({}, {"ZCODER_HOST": "127.0.0.1:9"}, "http://127.0.0.1:9"),
        ({}, {"OLLAMA_HOST": "127.0.0.1:9"}, "http://127.0.0.1:9"),
    ],
)
def test_a_host_given_by_flag_or_environment_wins(
    tmp_path: Path,
    dirs: tuple[Path, Path],
    flags: dict[str, str],
    env: dict[str, str],
    host: str,
) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws)
    got = settle_resume(_config(tmp_path, ws, env, resume=sid, **flags))
    assert (got.host, got.api, got.server_note) == (host, "ollama", "")


def test_another_api_given_leaves_the_server_to_detection(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws)
    got = settle_resume(_config(tmp_path, ws, resume=sid, api="ollama"))
    assert got.autodetect and got.api == "ollama"
    same = settle_resume(_config(tmp_path, ws, resume=sid, api="openai"))
    assert same.host == V1


def test_m_wins_over_the_session_model(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws)
    got = settle_resume(_config(tmp_path, ws, resume=sid, model="other:1b"))
    assert got.model == "other:1b" and got.host == V1


def test_a_session_saved_before_servers_were_kept_is_unknown(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws, server=None)
    got = settle_resume(_config(tmp_path, ws, resume=sid))
    assert got.autodetect and got.server_note == ""


def test_a_given_workspace_that_does_not_hold_it_says_which_does(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, elsewhere = dirs
    sid = _saved(tmp_path, ws)
    with pytest.raises(SessionNotFound) as caught:
        settle_resume(_config(tmp_path, elsewhere, resume=sid, workspace=str(elsewhere)))
    assert str(caught.value) == (
        f"session {sid} belongs to workspace {ws} (coding profile): "
        f"run zcoder -w {ws} --resume {sid}"
    )


def test_a_given_profile_that_does_not_hold_it_says_which_does(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws, profile="sysadmin")
    with pytest.raises(SessionNotFound) as caught:
        settle_resume(_config(tmp_path, ws, resume=sid, profile="coding"))
    assert str(caught.value).endswith(f"run zcoder -w {ws} --profile sysadmin --resume {sid}")
    # No profile given: it opens in its own.
    got = settle_resume(_config(tmp_path, ws, resume=sid))
    assert got.profile == "sysadmin" and got.command_policy == "ask"


def test_a_malformed_id_is_left_to_the_open(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    config = _config(tmp_path, ws, resume="../x")
    assert settle_resume(config) == config
    assert find_session(tmp_path / "zh", "../x") == []


def test_the_agent_name_comes_back_unless_one_is_given(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, elsewhere = dirs
    sid = _saved(tmp_path, ws, agent_name="alpha")
    assert settle_resume(_config(tmp_path, elsewhere, resume=sid)).agent_name == "alpha"
    named = _config(tmp_path, elsewhere, {"ZCODER_AGENT_NAME": "beta"}, resume=sid)
    assert settle_resume(named).agent_name == "beta"
    flagged = _config(tmp_path, elsewhere, resume=sid, agent_name="gamma")
    assert settle_resume(flagged).agent_name == "gamma"


def test_a_session_saved_before_agent_names_were_kept_resumes_without_one(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    sid = _saved(tmp_path, ws)
    assert settle_resume(_config(tmp_path, ws, resume=sid)).agent_name == ""


def test_an_id_saved_nowhere_says_so_not_only_for_this_workspace(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    _saved(tmp_path, ws)  # another session exists: the id is still unknown
    with pytest.raises(SessionNotFound) as caught:
        settle_resume(_config(tmp_path, ws, resume="1_99999"))
    assert str(caught.value) == "no saved session 1_99999 in any workspace or profile"


def test_a_session_of_zcoders_own_server_starts_it_again_for_its_file(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, _ = dirs
    model = tmp_path / "smollm2.gguf"
    model.write_bytes(b"GGUF")
    sid = _saved(tmp_path, ws, server=SessionServer(V1, "openai", str(model)))
    got = settle_resume(_config(tmp_path, ws, resume=sid))
    # As --gguf FILE: the dead address is not used; the run starts the server again.
    assert (got.gguf, got.host, got.api, got.autodetect) == (model, "", "openai", False)
    assert got.model == "smollm2:135m" and got.resume_note == ""
    assert got.resume_command(sid) == f"zcoder --resume {sid} --gguf {model}"
    # A host given wins, as for any session.
    given = settle_resume(_config(tmp_path, ws, resume=sid, host="127.0.0.1:9"))
    assert given.gguf is None and given.host == "http://127.0.0.1:9"


def test_a_session_whose_model_file_is_gone_says_so_and_looks_for_a_server(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    ws, elsewhere = dirs
    gone = tmp_path / "deleted.gguf"
    sid = _saved(tmp_path, ws, server=SessionServer(V1, "openai", str(gone)))
    got = settle_resume(_config(tmp_path, elsewhere, resume=sid))
    assert got.gguf is None and got.autodetect and got.host != V1
    assert got.resume_note.endswith(
        f"; session {sid} ran on llama.cpp started for {gone}, which is gone: looking for a "
        "running server instead (--gguf FILE starts one for another file)"
    )
    assert got.resume_note.startswith(f"session {sid} belongs to workspace {ws}")
