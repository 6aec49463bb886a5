"""The session store: format round trip, title and ledger, atomic saves, corruption, locks."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zcoder.session.journal
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.errors import SessionCorrupt, SessionError, SessionLocked, SessionNotFound
from zcoder.session.store import DEFAULT_TITLE, Session, SessionStore, SessionSummary


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "zhome"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def store(home: Path, workspace: Path) -> Iterator[SessionStore]:
    s = SessionStore(home, workspace, "coding")
    yield s
    s.close()


def _answered(s: Session, text: str = "hi") -> Session:
    """A session a model answered in: the store writes only those."""
    s.history += [Message("user", text), Message("assistant", "hello")]
    return s


def _full_session(s: Session) -> None:
    weird = "naïve ünïcode ✓ 🚀 \x00\x07\x1b[31m\r\n\t\u202e \udcff end"
    s.history += [
        Message("user", "fix it " + weird),
        Message(
            "assistant",
            "",
            thinking="hmm\nthink",
            tool_calls=(
                ToolCall(
                    "run_command",
                    {"command": "ls -la", "n": 3, "x": 1.5, "ok": True, "none": None},
                    id="c1",
                ),
                ToolCall("apply_patch", {"nested": {"a": [1, {"b": [weird, None]}], "e": {}}}),
            ),
        ),
        Message("tool", "Exit code: 0\n" + weird, tool_name="run_command"),
        Message("assistant", "done " + weird),
    ]
    s.events += [
        TranscriptEvent("user", "fix it", at=1.0),
        TranscriptEvent("assistant", "done", at=2.0),
        TranscriptEvent("tool", "ls", at=3.0, meta={"name": "run_command", "state": "completed"}),
        TranscriptEvent("system", "notice", at=4.0),
        TranscriptEvent("error", "boom " + weird, at=5.0),
        TranscriptEvent(
            "relay",
            "do the thing",
            at=6.0,
            meta={"project": "p", "pid": "42", "workspace": "/w", "instance_id": "42-1"},
        ),
    ]
    s.record_user_prompt("fix it " + weird)


def test_round_trip_keeps_every_message_and_event_kind(
    store: SessionStore, home: Path, workspace: Path
) -> None:
    s = store.create("qwen3-coder:latest")
    _full_session(s)
    store.save(s)
    store.release(s)
    reader = SessionStore(home, workspace, "coding")
    again = reader.open(s.id)
    assert again == s
    assert again.history[1].tool_calls[1].arguments["nested"]["a"][1]["b"][0].endswith(" end")
    reader.close()


def test_the_file_is_versioned_ascii_json(store: SessionStore) -> None:
    s = store.create("m")
    _full_session(s)
    store.save(s)
    raw = (store.dir / f"{s.id}.json").read_bytes()
    raw.decode("ascii")
    assert raw.count(b"\n") == 1 and raw.endswith(b"\n")  # one snapshot line
    data = json.loads(raw)
    assert data["format"] == 2
    assert data["id"] == s.id and data["workspace"] == store.workspace


def test_nothing_is_written_until_a_model_answered(store: SessionStore) -> None:
    s = store.create("m")
    assert store.list() == []
    assert store.save(s) is False
    s.record_user_prompt("hi")
    s.history.append(Message("user", "hi"))
    s.events.append(TranscriptEvent("error", "Ollama is not reachable"))
    assert store.save(s) is False  # a start that never reached a model leaves nothing
    assert store.list() == [] and not store.is_saved(s.id)
    s.history.append(Message("assistant", "hello"))
    assert store.save(s) is True
    assert [r.id for r in store.list()] == [s.id] and store.is_saved(s.id)


def test_session_ids_follow_the_grammar(store: SessionStore) -> None:
    ids = {store.create("m").id for _ in range(5)}
    assert len(ids) == 5
    for sid in ids:
        secs, rand = sid.split("_")
        assert secs.isdigit() and len(rand) == 5 and rand.isdigit()


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("fix the bug", "fix the bug"),
        ("  fix\n\tthe   bug \n\n", "fix the bug"),
        ("x" * 60, "x" * 42),
        ("a" * 41 + " tail", "a" * 41),
        ("déjà vu ✓ " * 10, ("déjà vu ✓ " * 10)[:42].rstrip()),
    ],
)
def test_title_is_the_first_prompt_flattened_and_cut(prompt: str, title: str) -> None:
    s = Session(id="1_1", workspace="/w", profile="coding", model="m")
    assert s.title == DEFAULT_TITLE
    s.record_user_prompt(prompt)
    assert s.title == title
    assert len(s.title) <= 42
    s.record_user_prompt("a second prompt")
    assert s.title == title


def test_a_blank_first_prompt_leaves_the_title_to_the_next() -> None:
    s = Session(id="1_1", workspace="/w", profile="coding", model="m")
    s.record_user_prompt(" \n\t")
    assert s.title == DEFAULT_TITLE
    s.record_user_prompt("real work")
    assert s.title == "real work"
    assert s.user_requests == [" \n\t", "real work"]


def test_ledger_keeps_exact_prompts_and_relay_text_never_enters_it(store: SessionStore) -> None:
    s = store.create("m")
    relay = "<agent_relay>\nTask:\nrename users.name\n</agent_relay>"
    s.history.append(Message("user", relay))
    s.events.append(TranscriptEvent("relay", "rename users.name", meta={"pid": "1"}))
    s.history.append(Message("assistant", "done"))
    assert s.title == DEFAULT_TITLE and s.user_requests == []
    s.record_user_prompt("  line one\nline two  ")
    assert s.user_requests == ["  line one\nline two  "]
    assert s.title == "line one line two"
    store.save(s)
    store.release(s)
    again = store.open(s.id)
    assert again.user_requests == ["  line one\nline two  "]
    assert again.title == "line one line two"


def test_save_requires_the_session_open_here(store: SessionStore, workspace: Path) -> None:
    stranger = Session(id="1_1", workspace=str(workspace), profile="coding", model="m")
    with pytest.raises(SessionError, match="not open in this process"):
        store.save(stranger)
    s = store.create("m")
    store.release(s)
    with pytest.raises(SessionError, match="not open"):
        store.save(s)


def test_save_sets_updated_at(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _answered(store.create("m"))
    monkeypatch.setattr(time, "time", lambda: 5000.0)
    store.save(s)
    assert s.updated_at == 5000.0
    assert store.list()[0].updated_at == 5000.0


def test_a_crash_during_a_snapshot_keeps_the_previous_file(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _answered(store.create("m"))
    s.record_user_prompt("first")
    store.save(s)
    before = (store.dir / f"{s.id}.json").read_bytes()
    s.history[0] = Message("user", "rewritten")  # not an append: the save writes a snapshot

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(SessionError, match="No space left on device"):
        store.save(s)
    assert (store.dir / f"{s.id}.json").read_bytes() == before
    assert [p.name for p in store.dir.iterdir() if p.name.endswith(".tmp")] == []


def test_a_crash_during_an_append_keeps_what_was_saved_before(
    store: SessionStore, home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    s.history.append(Message("user", "second"))
    store.save(s)
    saved = [*s.history]
    s.history.append(Message("user", "third " * 50))
    real_pwrite = os.pwrite

    def half_then_full(fd: int, data: bytes, offset: int) -> int:
        real_pwrite(fd, bytes(data)[: len(data) // 2], offset)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_full)
    with pytest.raises(SessionError, match="No space left on device"):
        store.save(s)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    path = store.dir / f"{s.id}.json"
    assert not path.read_bytes().endswith(b"\n")  # a torn last line
    reader = SessionStore(home, workspace, "coding")
    assert reader.list() == [SessionSummary(s.id, DEFAULT_TITLE, "m", s.updated_at, 3)]
    store.save(s)  # the next save repairs the file
    store.release(s)
    again = reader.open(s.id)
    assert again.history == s.history and again.history[:3] == saved
    reader.release(again)


def test_a_leftover_temp_file_is_ignored_and_cleaned_on_open(store: SessionStore) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    store.release(s)
    leftover = store.dir / f".{s.id}.json.deadbeef.tmp"
    leftover.write_bytes(b'{"format": 1, "id": "torn')
    assert [r.id for r in store.list()] == [s.id]
    assert store.list()[0].problem == ""
    store.open(s.id)
    assert not leftover.exists()


def test_a_truncated_file_is_reported_never_crashes_or_spreads(store: SessionStore) -> None:
    good = _answered(store.create("m"))
    good.record_user_prompt("good one")
    store.save(good)
    bad = _answered(store.create("m"))
    store.save(bad)
    store.release(bad)
    path = store.dir / f"{bad.id}.json"
    torn = path.read_bytes()[:40]
    path.write_bytes(torn)

    with pytest.raises(SessionCorrupt) as info:
        store.open(bad.id)
    assert str(path) in str(info.value) and "not valid JSON" in str(info.value)
    rows = {r.id: r for r in store.list()}
    assert rows[good.id].title == "good one" and rows[good.id].problem == ""
    assert rows[bad.id].problem == str(info.value)
    assert (rows[bad.id].title, rows[bad.id].messages) == ("", 0)
    fresh = _answered(store.create("m"))
    store.save(fresh)
    store.save(good)
    assert path.read_bytes() == torn  # never overwritten silently
    # the failed open released its lock: a second attempt fails the same way, not "locked"
    with pytest.raises(SessionCorrupt):
        store.open(bad.id)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: d.update(title=5), "expected str @ $.title"),
        (lambda d: d.update(format=3), "format 3 is not a supported one (1 or 2)"),
        (lambda d: d.pop("format"), "format None"),
        (lambda d: d.update(surprise=1), "extra fields found (surprise)"),
        (lambda d: d.update(history=[{"role": "wizard", "content": ""}]), "history"),
        (lambda d: d.update(id="1_2"), "it holds session '1_2'"),
        (lambda d: d.pop("model"), "required field missing"),
    ],
)
def test_invalid_content_is_corrupt(store: SessionStore, edit: object, reason: str) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    store.release(s)
    path = store.dir / f"{s.id}.json"
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    with pytest.raises(SessionCorrupt, match="corrupt") as info:
        store.open(s.id)
    assert reason in str(info.value)
    assert store.list()[0].problem == str(info.value)


def test_a_file_that_is_not_an_object_is_corrupt(store: SessionStore) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    store.release(s)
    (store.dir / f"{s.id}.json").write_text("[1, 2]")
    with pytest.raises(SessionCorrupt, match="not a JSON object"):
        store.open(s.id)


def test_second_open_in_the_same_process_is_refused_until_released(
    store: SessionStore, home: Path, workspace: Path
) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    other = SessionStore(home, workspace, "coding")
    with pytest.raises(SessionLocked, match=f"pid {os.getpid()}"):
        other.open(s.id)
    with pytest.raises(SessionLocked, match="already open in this process"):
        store.open(s.id)
    store.release(s)
    store.release(s)  # idempotent
    assert other.open(s.id) == s
    other.close()


_HOLDER = """
import sys
from pathlib import Path
from zcoder.session.store import SessionStore
store = SessionStore(Path(sys.argv[1]), Path(sys.argv[2]), "coding")
store.open(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
"""


def test_lock_is_held_across_processes_and_dies_with_the_holder(
    store: SessionStore, home: Path, workspace: Path
) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    store.release(s)
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(home), str(workspace), s.id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        with pytest.raises(SessionLocked) as info:
            store.open(s.id)
        assert str(info.value) == (
            f"session {s.id} is open in another zcoder process (pid {child.pid})"
        )
        child.kill()  # no release: the lock must die with the process
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
    assert store.open(s.id).id == s.id


def test_list_is_newest_first(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    for title, saved_at in (("a", 100.0), ("b", 300.0), ("c", 200.0)):
        s = store.create("m")
        s.record_user_prompt(title)
        s.history += [Message("user", title), Message("assistant", "ok")]
        monkeypatch.setattr(time, "time", lambda t=saved_at: t)
        store.save(s)
        made.append(s.id)
    assert store.list() == [
        SessionSummary(made[1], "b", "m", 300.0, 2),
        SessionSummary(made[2], "c", "m", 200.0, 2),
        SessionSummary(made[0], "a", "m", 100.0, 2),
    ]


def test_sessions_are_scoped_by_workspace_and_profile(
    store: SessionStore, home: Path, workspace: Path, tmp_path: Path
) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    for other in (
        SessionStore(home, other_ws, "coding"),
        SessionStore(home, workspace, "sysadmin"),
    ):
        assert other.list() == []
        with pytest.raises(SessionNotFound, match=f"no saved session {s.id} for"):
            other.open(s.id)
    scope = json.loads((store.dir / ".scope.json").read_text())
    assert scope == {"workspace": str(workspace), "profile": "coding"}


def test_a_file_moved_into_another_scope_is_refused(
    store: SessionStore, home: Path, tmp_path: Path
) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    store.release(s)
    other_ws = tmp_path / "other"
    other_ws.mkdir()
    other = SessionStore(home, other_ws, "coding")
    other.dir.mkdir(parents=True)
    os.rename(store.dir / f"{s.id}.json", other.dir / f"{s.id}.json")
    with pytest.raises(SessionCorrupt, match="it belongs to"):
        other.open(s.id)


@pytest.mark.parametrize("bad", ["../x", "", "a/b", "..", ".", "x" * 65, "a b", "ä", "../../etc"])
def test_bad_ids_are_not_found(store: SessionStore, bad: str, home: Path) -> None:
    with pytest.raises(SessionNotFound, match="a session id has only"):
        store.open(bad)
    assert not (home / "sessions").exists()


def test_missing_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound, match="no saved session 1_00000 for"):
        store.open("1_00000")


def test_files_and_directories_are_private(store: SessionStore, home: Path) -> None:
    old = os.umask(0o022)
    try:
        s = _answered(store.create("m"))
        store.save(s)
    finally:
        os.umask(old)
    for d in (home / "sessions", store.dir):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in (store.dir / f"{s.id}.json", store.dir / f"{s.id}.lock"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert (store.dir / f"{s.id}.lock").read_text() == f"{os.getpid()}\n"
    store.release(s)
    assert not (store.dir / f"{s.id}.lock").exists()


def test_unserialisable_content_fails_cleanly(store: SessionStore) -> None:
    s = _answered(store.create("m"))
    store.save(s)
    before = (store.dir / f"{s.id}.json").read_bytes()
    s.history.append(Message("assistant", "", tool_calls=(ToolCall("x", {"bad": {1, 2}}),)))
    with pytest.raises(SessionError, match="cannot be saved"):
        store.save(s)
    assert (store.dir / f"{s.id}.json").read_bytes() == before


def test_updated_at_uses_wall_clock(store: SessionStore) -> None:
    s = store.create("m")
    before = time.time()
    store.save(s)
    assert s.updated_at >= before


def test_a_session_too_large_to_open_is_not_written(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _answered(store.create("m"))
    s.record_user_prompt("hi")
    store.save(s)
    saved = store.dir.joinpath(f"{s.id}.json").read_bytes()
    monkeypatch.setattr(zcoder.session.journal, "MAX_FILE_BYTES", len(saved) + 100)
    s.history.append(Message(role="user", content="x" * 200))
    with pytest.raises(SessionError, match=r"would be over \d+ bytes; start a new session"):
        store.save(s)
    assert store.dir.joinpath(f"{s.id}.json").read_bytes() == saved


def test_a_file_with_a_repeated_key_is_corrupt_and_nan_arguments_load(
    store: SessionStore,
) -> None:
    s = _answered(store.create("m"))
    s.history.append(Message("assistant", "", tool_calls=(ToolCall("f", {"x": math.nan}),)))
    store.save(s)
    store.release(s)
    reopened = store.open(s.id)
    assert math.isnan(reopened.history[-1].tool_calls[0].arguments["x"])
    store.release(reopened)
    path = store.dir / f"{s.id}.json"
    data = path.read_bytes()
    path.write_bytes(data.replace(b'{"format":2,', b'{"format":2,"title":"x",', 1))
    with pytest.raises(SessionCorrupt, match="duplicate key"):
        store.open(s.id)
