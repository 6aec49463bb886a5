from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.relay.helpers import make_enqueue
from zcoder.relay.envelope import Limits
from zcoder.relay.spool.store import Claimed, Refused, Spool


def new_spool(root: Path, max_queue: int = 16, limits: Limits | None = None) -> Spool:
    spool = Spool(root / "relay", max_queue=max_queue, limits=limits)
    spool.create()
    return spool


def inbox(spool: Spool) -> list[str]:
    return sorted(os.listdir(spool.root / "inbox"))


def test_create_lays_out_private_dirs(short_tmp: Path) -> None:
    old = os.umask(0o022)
    try:
        spool = new_spool(short_tmp)
    finally:
        os.umask(old)
    for name in ("", "inbox", "processing", "done", "quarantine"):
        st = os.lstat(spool.root / name)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert (spool.root / "sequence").read_text() == "0\n"
    assert (spool.root / "state").read_text() == "accepting"
    assert stat.S_IMODE(os.lstat(spool.root / "state").st_mode) == 0o600
    spool.create()  # idempotent
    assert spool.depth() == 0 and spool.claim() is None


def test_fifo_with_sequence_and_positions(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    results = [
        spool.enqueue(make_enqueue(f"1-abcd-{i}", body=f"task {i}"), verified=i != 2)
        for i in (1, 2, 3)
    ]
    assert results == [("accepted", 1), ("accepted", 2), ("accepted", 3)]
    assert inbox(spool) == [
        "000000000001-1-abcd-1.json",
        "000000000002-1-abcd-2.json",
        "000000000003-1-abcd-3.json",
    ]
    assert (spool.root / "sequence").read_text() == "3\n"
    got: list[Claimed] = []
    while (c := spool.claim()) is not None:
        got.append(c)
    assert [(c.sequence, c.envelope.body, c.verified) for c in got] == [
        (1, "task 1", True),
        (2, "task 2", False),
        (3, "task 3", True),
    ]
    assert got[0].envelope == make_enqueue("1-abcd-1", body="task 1")
    assert got[0].path == spool.root / "processing" / "000000000001-1-abcd-1.json"
    assert spool.depth() == 3  # claimed is still unfinished
    for c in got:
        spool.complete(c)
    assert spool.depth() == 0


def test_spool_file_is_metadata_line_then_wire_json(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    env = make_enqueue("1-abcd-1", body='tab\t "quote" \\ * ü 🎉\nline')
    spool.enqueue(env, verified=True)
    path = spool.root / "inbox" / inbox(spool)[0]
    head, payload = path.read_bytes().split(b"\n", 1)
    assert json.loads(head) == {"spool": 1, "verified": True}
    assert json.loads(payload)["body"] == env.body
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert [n for n in os.listdir(spool.root) if n.startswith(".tmp")] == []


def test_duplicates_across_inbox_processing_and_done(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    env = make_enqueue("1-abcd-7")
    assert spool.enqueue(env, verified=True) == ("accepted", 1)
    assert spool.enqueue(env, verified=True) == ("duplicate", None)
    claimed = spool.claim()
    assert claimed is not None
    assert spool.enqueue(env, verified=True) == ("duplicate", None)
    spool.complete(claimed)
    receipt = spool.root / "done" / "1-abcd-7.done"
    assert receipt.read_bytes() == b""
    assert os.listdir(spool.root / "processing") == []
    assert spool.enqueue(env, verified=False) == ("duplicate", None)
    # Ids that share a suffix or a prefix are not duplicates.
    assert spool.enqueue(make_enqueue("1-abcd-77"), verified=True)[0] == "accepted"
    assert spool.enqueue(make_enqueue("abcd-7"), verified=True)[0] == "accepted"
    assert spool.enqueue(make_enqueue("1-abcd-"), verified=True)[0] == "accepted"
    assert spool.depth() == 3


def test_duplicate_wins_over_paused_and_full(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, max_queue=1)
    env = make_enqueue("1-abcd-1")
    spool.enqueue(env, verified=True)
    assert spool.enqueue(make_enqueue("1-abcd-2"), verified=True) == ("full", None)
    assert spool.enqueue(env, verified=True) == ("duplicate", None)
    spool.set_paused(True)
    assert spool.enqueue(env, verified=True) == ("duplicate", None)
    assert spool.enqueue(make_enqueue("1-abcd-2"), verified=True) == ("paused", None)


def test_queue_limit_counts_inbox_and_processing(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, max_queue=4)
    for n, sender in enumerate(["1-abcd", "3-wxyz", "1-abcd", "3-wxyz"], start=1):
        env = make_enqueue(f"{sender}-{n}", sender=sender)
        assert spool.enqueue(env, verified=True) == ("accepted", n)
    assert spool.enqueue(make_enqueue("5-pqrs-5", sender="5-pqrs"), verified=True)[0] == "full"
    claimed = spool.claim()
    assert claimed is not None
    assert spool.enqueue(make_enqueue("5-pqrs-5", sender="5-pqrs"), verified=True)[0] == "full"
    spool.complete(claimed)
    assert spool.enqueue(make_enqueue("5-pqrs-5", sender="5-pqrs"), verified=True) == (
        "accepted",
        4,
    )


def test_one_sender_gets_at_most_half_of_the_queue_and_the_others_still_get_in(
    short_tmp: Path,
) -> None:
    spool = new_spool(short_tmp, max_queue=4)
    flood = [spool.enqueue(make_enqueue(f"1-abcd-{n}"), verified=True)[0] for n in range(5)]
    assert flood == ["accepted", "accepted", "full", "full", "full"]
    other = make_enqueue("3-wxyz-1", sender="3-wxyz")
    assert spool.enqueue(other, verified=True) == ("accepted", 3)
    claimed = spool.claim()  # the flood's first, settled: its sender has room again
    assert claimed is not None and claimed.envelope.message_id == "1-abcd-0"
    spool.complete(claimed)
    assert spool.enqueue(make_enqueue("1-abcd-9"), verified=True)[0] == "accepted"
    assert spool.enqueue(make_enqueue("1-abcd-10"), verified=True)[0] == "full"


def test_pause_keeps_accepted_messages_and_persists(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    before = spool.changes.count
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    spool.set_paused(True)
    assert spool.changes.count == before + 2
    spool.set_paused(True)  # no change, nothing noted
    assert spool.changes.count == before + 2
    assert spool.paused
    assert (spool.root / "state").read_text() == "paused"
    refused = make_enqueue("1-abcd-2")
    assert spool.enqueue(refused, verified=True) == ("paused", None)
    assert spool.take_news()[-1] == Refused(refused)  # the user who paused is told
    assert Spool(spool.root, max_queue=16).paused  # a new object reads the state file
    claimed = spool.claim()
    assert claimed is not None and claimed.envelope.message_id == "1-abcd-1"
    spool.set_paused(False)
    assert (spool.root / "state").read_text() == "accepting"
    assert spool.enqueue(make_enqueue("1-abcd-2"), verified=True) == ("accepted", 2)
    # And the refusal, the claim, the resume, the enqueue.
    assert spool.changes.count == before + 6


def test_sequence_is_monotonic_across_restarts(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    spool.enqueue(make_enqueue("1-abcd-2"), verified=True)
    claimed = spool.claim()
    assert claimed is not None
    spool.complete(claimed)
    again = Spool(spool.root, max_queue=16)
    again.create()
    again.enqueue(make_enqueue("1-abcd-3"), verified=True)
    assert inbox(again)[-1] == "000000000003-1-abcd-3.json"
    # A lost sequence file cannot make a number go back below what the queue holds.
    (spool.root / "sequence").unlink()
    third = Spool(spool.root, max_queue=16)
    third.enqueue(make_enqueue("1-abcd-4"), verified=True)
    assert inbox(third)[-1] == "000000000004-1-abcd-4.json"
    assert (spool.root / "sequence").read_text() == "4\n"


def test_limits_follow_the_configured_message_size(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, limits=Limits(max_bytes=200000, max_message_chars=50000))
    spool.enqueue(make_enqueue("1-abcd-1", body="x" * 40000), verified=True)
    claimed = spool.claim()
    assert claimed is not None and len(claimed.envelope.body) == 40000
    assert spool.take_problems() == []


def _plant(spool: Spool, name: str, data: bytes) -> None:
    (spool.root / "inbox" / name).write_bytes(data)


def test_invalid_entries_are_quarantined_and_reported(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    good = make_enqueue("1-abcd-9")
    spool.enqueue(good, verified=True)  # sequence 1
    first = spool.root / "inbox" / inbox(spool)[0]
    payload = first.read_bytes().split(b"\n", 1)[1]
    os.rename(first, spool.root / "inbox" / "000000000009-1-abcd-9.json")
    meta = b'{"spool":1,"verified":true}\n'
    _plant(spool, "000000000000-1-abcd-0.json", b"not json")
    _plant(spool, "000000000001-1-abcd-1.json", meta + payload)  # name and id differ
    _plant(spool, "000000000002-1-abcd-2.json", b'{"spool":1,"verified":"yes"}\n' + payload)
    _plant(spool, "000000000003-1-abcd-3.json", b"{}\n" + payload)
    _plant(spool, "zz-stray.json", payload)
    (spool.root / "inbox" / "000000000004-1-abcd-4.json").symlink_to(spool.root / "state")
    os.mkfifo(spool.root / "inbox" / "000000000005-1-abcd-5.json")
    claimed = spool.claim()
    assert claimed is not None and claimed.envelope == good
    assert claimed.sequence == 9
    problems = spool.take_problems()
    assert len(problems) == 6
    assert "'000000000000-1-abcd-0.json' was quarantined: its metadata line" in problems[0]
    assert "message id differs from its file name" in problems[1]
    assert "verified flag is not a boolean" in problems[2]
    assert "metadata line is missing or malformed" in problems[3]
    assert "cannot open it" in problems[4]
    assert "not a regular file" in problems[5]
    assert spool.claim() is None
    assert spool.take_problems() == [
        "relay spool entry 'zz-stray.json' was quarantined: "
        "its name is not <sequence>-<message-id>.json"
    ]
    assert spool.take_problems() == []
    assert sorted(os.listdir(spool.root / "quarantine")) == [
        "000000000000-1-abcd-0.json",
        "000000000001-1-abcd-1.json",
        "000000000002-1-abcd-2.json",
        "000000000003-1-abcd-3.json",
        "000000000004-1-abcd-4.json",
        "000000000005-1-abcd-5.json",
        "zz-stray.json",
    ]
    assert (spool.root / "state").read_text() == "accepting"  # the symlink was not followed
    assert spool.depth() == 1


def test_invalid_envelope_is_quarantined(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    _plant(spool, "000000000001-1-abcd-1.json", b'{"spool":1,"verified":true}\n{"protocol":1}')
    assert spool.claim() is None
    [problem] = spool.take_problems()
    assert "its envelope is invalid" in problem


def test_complete_refuses_a_foreign_path(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fake = Claimed(1, make_enqueue("1-abcd-1"), True, short_tmp / "x.json")
    with pytest.raises(ValueError, match="not in this spool's processing"):
        spool.complete(fake)
    assert os.listdir(spool.root / "done") == []


def test_complete_after_the_spool_was_removed_is_harmless(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    claimed = spool.claim()
    assert claimed is not None
    spool.remove()
    spool.complete(claimed)
    assert not os.path.lexists(spool.root)


def _fill(spool: Spool, n: int) -> set[str]:
    # From four senders: one sender may take only half of the queue.
    senders = [f"{k}-abcd" for k in range(1, 5)]
    envelopes = [make_enqueue(f"{senders[i % 4]}-{i}", sender=senders[i % 4]) for i in range(n)]
    for env in envelopes:
        assert spool.enqueue(env, verified=True)[0] == "accepted"
    return {env.message_id for env in envelopes}


def test_concurrent_claims_from_two_threads(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, max_queue=200)
    ids = _fill(spool, 200)
    barrier = threading.Barrier(2)
    won: list[list[str]] = [[], []]

    def claimer(slot: int) -> None:
        barrier.wait()
        while (c := spool.claim()) is not None:
            won[slot].append(c.envelope.message_id)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(won[0]) & set(won[1])
    assert sorted(won[0] + won[1]) == sorted(ids)
    assert spool.take_problems() == []


_CLAIMER = """
import sys
from pathlib import Path
from zcoder.relay.spool.store import Spool
spool = Spool(Path(sys.argv[1]), max_queue=500)
sys.stdin.readline()
while (c := spool.claim()) is not None:
    print(c.envelope.message_id, flush=True)
assert spool.take_problems() == []
"""


def test_concurrent_claims_from_two_processes(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, max_queue=500)
    ids = _fill(spool, 300)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, str(spool.root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = []
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0
        outputs.append(out.split())
    assert not set(outputs[0]) & set(outputs[1])
    assert sorted(outputs[0] + outputs[1]) == sorted(ids)
    assert len(os.listdir(spool.root / "processing")) == 300


async def test_wait_for_work_wakes_without_polling(
    short_tmp: Path, mock_clock: trio.testing.MockClock
) -> None:
    spool = new_spool(short_tmp)
    woke: list[int] = []

    async def waiter() -> None:
        await spool.wait_for_work()
        woke.append(spool.depth())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        start = trio.current_time()
        spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == start  # the clock never moved: no sleep-and-poll
    assert woke == [1, 1]


async def test_wait_for_work_returns_at_once_when_queued(
    short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spool = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    with trio.fail_after(1):
        await spool.wait_for_work()
    claimed = spool.claim()
    assert claimed is not None
    with trio.fail_after(1):
        await spool.wait_for_work()  # the claimed one is still unfinished work
    spool.complete(claimed)
    with trio.move_on_after(1) as scope:
        await spool.wait_for_work()
    assert scope.cancelled_caught


def test_remove_is_idempotent_and_never_follows_a_link(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    spool.remove()
    assert not os.path.lexists(spool.root)
    spool.remove()
    keep = short_tmp / "keep"
    keep.mkdir()
    (keep / "file").write_text("x")
    (short_tmp / "relay").symlink_to(keep)
    Spool(short_tmp / "relay", max_queue=1).remove()
    assert (keep / "file").read_text() == "x"


# -- the in-memory index agrees with the directories ----------------------------------------


def _on_disk(spool: Spool) -> tuple[set[str], set[str], set[str]]:
    """Message ids in inbox/, processing/ and done/, read from the directories."""

    def ids(key: str) -> set[str]:
        return {n[13:-5] for n in os.listdir(spool.root / key) if not n.startswith(".")}

    done = {n.removesuffix(".done") for n in os.listdir(spool.root / "done")}
    return ids("inbox"), ids("processing"), done


def _assert_index_matches_disk(spool: Spool, pool: list[str]) -> None:
    inbox_ids, processing_ids, done_ids = _on_disk(spool)
    assert spool.depth() == len(inbox_ids) + len(processing_ids)
    for mid in pool:
        assert spool.knows(mid) == (mid in inbox_ids | processing_ids | done_ids), mid
    fresh = Spool(spool.root, max_queue=16)  # what a new object reads from the disk
    assert fresh.depth() == spool.depth()
    assert [fresh.knows(m) for m in pool] == [spool.knows(m) for m in pool]
    sequence = int((spool.root / "sequence").read_text())
    names = os.listdir(spool.root / "inbox") + os.listdir(spool.root / "processing")
    assert all(int(n[:12]) <= sequence for n in names)


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), st.integers(0, 7)),
        st.tuples(st.just("claim"), st.just(0)),
        st.tuples(st.just("complete"), st.just(0)),
        st.tuples(st.just("corrupt"), st.integers(0, 7)),
        st.tuples(st.just("pause"), st.booleans().map(int)),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_index_stays_consistent_with_the_disk(ops: list[tuple[str, int]]) -> None:
    pool = [f"1-abcd-{i}" for i in range(8)]
    with tempfile.TemporaryDirectory(prefix="zi", dir="/tmp") as tmp:
        spool = new_spool(Path(tmp), max_queue=4)
        claimed: list[Claimed] = []
        for op, arg in ops:
            if op == "enqueue":
                status, _ = spool.enqueue(make_enqueue(pool[arg]), verified=True)
                assert status in ("accepted", "duplicate", "paused", "full")
            elif op == "claim" and (c := spool.claim()) is not None:
                claimed.append(c)
            elif op == "complete" and claimed:
                spool.complete(claimed.pop(0))
            elif op == "corrupt":  # damage the entry of that id if it waits in the inbox
                for name in os.listdir(spool.root / "inbox"):
                    if name[13:-5] == pool[arg]:
                        (spool.root / "inbox" / name).write_bytes(b"garbage")
            elif op == "pause":
                spool.set_paused(bool(arg))
            _assert_index_matches_disk(spool, pool)
        spool.take_problems()


def test_a_claim_lost_to_another_claimer_keeps_the_id_known(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    spool.enqueue(make_enqueue("1-abcd-2"), verified=True)
    other = Spool(spool.root, max_queue=16)  # e.g. another process on the same spool
    taken = other.claim()
    assert taken is not None and taken.envelope.message_id == "1-abcd-1"
    mine = spool.claim()
    assert mine is not None and mine.envelope.message_id == "1-abcd-2"
    assert spool.depth() == 1  # ours, processing; the other claimer's is not counted
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("duplicate", None)


def test_sequence_file_is_rewritten_in_place(short_tmp: Path) -> None:
    spool = new_spool(short_tmp, max_queue=32)  # one sender: half of it is 16
    inode = os.lstat(spool.root / "sequence").st_ino
    for i in range(1, 12):
        spool.enqueue(make_enqueue(f"1-abcd-{i}"), verified=True)
        assert (spool.root / "sequence").read_text() == f"{i}\n"
    assert os.lstat(spool.root / "sequence").st_ino == inode
    assert [n for n in os.listdir(spool.root) if n.startswith(".tmp")] == []
