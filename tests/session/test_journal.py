"""Session saves that cost what the turn added: the journal, its compaction, migration of
format-1 files, torn last lines, and saves in a worker thread."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.lowlevel
from hypothesis import given, settings
from hypothesis import strategies as st

import zcoder.session.saves
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.errors import SessionCorrupt
from zcoder.session.store import Session, SessionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    s = SessionStore(tmp_path / "zhome", ws, "coding")
    yield s
    s.close()


def _reopen(store: SessionStore, s: Session) -> Session:
    store.release(s)
    return store.open(s.id)


def _turn(s: Session, n: int) -> None:
    s.record_user_prompt(f"prompt {n}")
    s.history += [
        Message("user", f"prompt {n}"),
        Message("assistant", "", tool_calls=(ToolCall("run_command", {"command": "ls"}),)),
        Message("tool", "Exit code: 0\n" + "x" * 300, tool_name="run_command"),
        Message("assistant", f"answer {n}"),
    ]
    s.events += [TranscriptEvent("user", f"prompt {n}"), TranscriptEvent("assistant", "a")]


def _path(store: SessionStore, s: Session) -> Path:
    return store.dir / f"{s.id}.json"


def test_a_save_appends_one_line_with_what_the_turn_added(store: SessionStore) -> None:
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    path = _path(store, s)
    before = path.read_bytes()
    _turn(s, 1)
    store.save(s)
    after = path.read_bytes()
    assert after.startswith(before)  # nothing written before is written again
    entry = json.loads(after[len(before) :])
    assert after.endswith(b"\n") and after.count(b"\n") == 2
    assert [m["content"] for m in entry["add"]["history"]][::3] == ["prompt 1", "answer 1"]
    assert entry["add"]["user_requests"] == ["prompt 1"]
    assert set(entry["set"]) == {"updated_at"}
    assert len(after) - len(before) < 2 * len(before)  # what the turn added, not the session
    assert _reopen(store, s) == s


def test_model_and_title_changes_are_journal_entries(store: SessionStore) -> None:
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    s.model, s.title = "other:7b", "renamed"
    store.save(s)
    last = _path(store, s).read_bytes().splitlines()[-1]
    assert json.loads(last) == {
        "set": {"updated_at": s.updated_at, "model": "other:7b", "title": "renamed"}
    }
    assert _reopen(store, s) == s


def test_the_journal_is_compacted_into_one_snapshot_now_and_then(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zcoder.session.saves, "COMPACT_FLOOR", 0)
    s = store.create("m")
    sizes = []
    for n in range(40):
        _turn(s, n)
        store.save(s)
        data = _path(store, s).read_bytes()
        sizes.append(data.count(b"\n"))
        snapshot = len(data.split(b"\n", 1)[0]) + 1
        assert len(data) - snapshot <= max(snapshot, 1)  # the journal never outgrows it
    assert 1 in sizes[1:] and max(sizes) > 1  # both appends and compactions happened
    assert _reopen(store, s) == s


def test_a_change_that_is_not_an_append_writes_a_snapshot(store: SessionStore) -> None:
    s = store.create("m")
    _turn(s, 0)
    _turn(s, 1)
    store.save(s)
    s.history[2] = Message("tool", "Exit code: 1", tool_name="run_command")
    del s.events[0]
    store.save(s)
    assert _path(store, s).read_bytes().count(b"\n") == 1
    assert _reopen(store, s) == s


def test_a_torn_last_line_is_ignored_and_overwritten_by_the_next_save(
    store: SessionStore,
) -> None:
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    _turn(s, 1)
    store.save(s)
    path = _path(store, s)
    good = path.read_bytes()
    store.release(s)
    path.write_bytes(good + b'{"add":{"history":[{"role":"user","con')  # a crash mid-append
    again = store.open(s.id)
    assert again == s
    _turn(again, 2)
    store.save(again)  # appended where the torn line began
    data = path.read_bytes()
    assert data.startswith(good) and data.endswith(b"\n") and data.count(b"\n") == 3
    assert _reopen(store, again) == again


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "line 2: not valid JSON"),
        (b"[1]", "line 2: not a journal entry"),
        (b'{"set":{},"x":1}', "line 2: extra fields found (x)"),
        (b'{"set":{"id":"1_1"}}', "line 2: unknown fields"),
        (b'{"add":{"history":{}},"set":{}}', "line 2: history is not a list"),
        (b'{"add":{"history":[{"role":"wizard","content":""}]},"set":{}}', "history"),
        (b'{"set":{"title":5}}', "expected str @ $.title"),
    ],
)
def test_a_damaged_journal_line_is_corrupt(store: SessionStore, line: bytes, reason: str) -> None:
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    store.release(s)
    path = _path(store, s)
    path.write_bytes(path.read_bytes() + line + b"\n" + b'{"set":{}}\n')
    with pytest.raises(SessionCorrupt, match="is corrupt") as info:
        store.open(s.id)
    assert reason in str(info.value)
    assert store.list()[0].problem == str(info.value)


def test_a_format_1_file_loads_and_its_next_save_rewrites_it(store: SessionStore) -> None:
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    store.release(s)
    path = _path(store, s)
    old = json.loads(path.read_bytes())
    old["format"] = 1
    path.write_text(json.dumps(old, indent=2))  # the old whole-file format, pretty or not
    again = store.open(s.id)
    assert again == s
    assert store.list()[0].messages == 4
    _turn(again, 1)
    store.save(again)
    data = path.read_bytes()
    assert data.count(b"\n") == 1 and json.loads(data)["format"] == 2
    assert _reopen(store, again) == again


def test_save_async_runs_in_a_worker_thread_while_the_session_changes(
    store: SessionStore,
) -> None:
    s = store.create("m")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for n in range(20):
                _turn(s, n)
                nursery.start_soon(store.save_async, s)
                await trio.lowlevel.checkpoint()
        assert await store.save_async(s) is True

    trio.run(main)
    assert _reopen(store, s) == s


def test_save_async_is_not_cancelled_half_way(store: SessionStore) -> None:
    s = store.create("m")
    _turn(s, 0)

    async def main() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.save_async(s)  # shielded: done all the same

    trio.run(main)
    assert store.is_saved(s.id)


_STEP = st.sampled_from(["turn", "save", "rewrite", "model", "reopen"])


@settings(max_examples=30, deadline=None)
@given(st.lists(_STEP, max_size=25))
def test_any_sequence_of_saves_reads_back_as_the_session(
    tmp_path_factory: pytest.TempPathFactory, steps: list[str]
) -> None:
    home = tmp_path_factory.mktemp("h")
    store = SessionStore(home, home, "coding")
    s = store.create("m")
    _turn(s, 0)
    store.save(s)
    saved = _copy(s)
    try:
        for n, step in enumerate(steps):
            if step == "turn":
                _turn(s, n)
            elif step == "rewrite" and s.history:
                s.history.pop()
            elif step == "model":
                s.model = f"m{n}"
            elif step == "reopen":
                s = _reopen(store, s)
                assert s == saved
            store.save(s)
            saved = _copy(s)
        assert _reopen(store, s) == s
    finally:
        store.release(s)


def _copy(s: Session) -> Session:
    return Session(
        id=s.id, workspace=s.workspace, profile=s.profile, model=s.model, title=s.title,
        created_at=s.created_at, updated_at=s.updated_at, history=list(s.history),
        events=list(s.events), user_requests=list(s.user_requests),
    )  # fmt: skip


def test_a_one_shot_session_opened_in_the_app_stays_an_app_session(store: SessionStore) -> None:
    # /sessions lists a one-shot run's session apart; once the app has opened and saved it,
    # it is one of the app's, also when that save is a journal entry.
    s = store.create("m")
    s.oneshot = True
    _turn(s, 0)
    store.save(s)
    s = _reopen(store, s)
    assert s.oneshot
    s.oneshot = False
    _turn(s, 1)
    store.save(s)
    last = json.loads(_path(store, s).read_bytes().splitlines()[-1])
    assert last["set"]["oneshot"] is False
    assert not _reopen(store, s).oneshot
