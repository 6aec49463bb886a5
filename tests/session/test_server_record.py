"""A session keeps the model server it last talked to; a file without it reads as unknown."""

from __future__ import annotations

import json
from pathlib import Path

from zcoder.conversation import Message
from zcoder.session.data import SessionServer
from zcoder.session.store import SessionStore


def _store(tmp_path: Path) -> SessionStore:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return SessionStore(tmp_path / "home", ws, "coding")


def test_the_server_is_saved_and_changed_by_a_journal_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = store.create("m")
    session.history += [Message("user", "hi"), Message("assistant", "hello")]
    session.server = SessionServer("http://127.0.0.1:8080/v1", "openai")
    assert store.save(session)
    session.server = SessionServer("http://127.0.0.1:11434", "ollama")
    assert store.save(session)
    store.close()
    lines = store.dir.joinpath(f"{session.id}.json").read_text().splitlines()
    first = {"host": "http://127.0.0.1:8080/v1", "api": "openai", "gguf": ""}
    assert json.loads(lines[0])["server"] == first
    assert json.loads(lines[1])["set"]["server"] == {
        "host": "http://127.0.0.1:11434",
        "api": "ollama",
        "gguf": "",
    }
    again = _store(tmp_path)
    assert again.open(session.id).server == SessionServer("http://127.0.0.1:11434", "ollama")
    again.close()


def test_a_file_written_before_servers_were_kept_reads_as_unknown(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = store.create("m")
    session.history += [Message("user", "hi"), Message("assistant", "hello")]
    assert store.save(session)
    store.close()
    path = store.dir / f"{session.id}.json"
    body = json.loads(path.read_text().splitlines()[0])
    del body["server"]
    path.write_text(json.dumps(body) + "\n")
    again = _store(tmp_path)
    assert again.peek(session.id).server is None
    assert again.open(session.id).server is None
    again.close()


def test_the_agent_name_is_saved_and_changed_by_a_journal_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = store.create("m")
    session.history += [Message("user", "hi"), Message("assistant", "hello")]
    assert store.save(session)
    session.agent_name = "alpha"
    assert store.save(session)
    store.close()
    lines = store.dir.joinpath(f"{session.id}.json").read_text().splitlines()
    assert json.loads(lines[1])["set"]["agent_name"] == "alpha"
    again = _store(tmp_path)
    assert again.open(session.id).agent_name == "alpha"
    again.close()


def test_a_server_saved_before_model_files_were_kept_has_none(tmp_path: Path) -> None:
    store = _store(tmp_path)
    session = store.create("m")
    session.history += [Message("user", "hi"), Message("assistant", "hello")]
    session.server = SessionServer("http://127.0.0.1:8080/v1", "openai", "/m/a.gguf")
    assert store.save(session)
    store.close()
    path = store.dir / f"{session.id}.json"
    assert _store(tmp_path).peek(session.id).server == session.server
    body = json.loads(path.read_text().splitlines()[0])
    del body["server"]["gguf"]
    path.write_text(json.dumps(body) + "\n")
    again = _store(tmp_path)
    assert again.peek(session.id).server == SessionServer("http://127.0.0.1:8080/v1", "openai")
