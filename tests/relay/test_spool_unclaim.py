"""``Spool.unclaim``: a claimed message that never ran goes back to the head of the queue."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.relay.helpers import make_enqueue
from zcoder.errors import RelayError
from zcoder.relay.spool.store import Claimed, Spool


def new_spool(root: Path) -> Spool:
    spool = Spool(root / "relay", max_queue=16)
    spool.create()
    return spool


def fill(spool: Spool, *ids: str) -> None:
    for mid in ids:
        assert spool.enqueue(make_enqueue(mid, body=f"task {mid}"), verified=True)[0] == "accepted"


def claim(spool: Spool) -> Claimed:
    claimed = spool.claim()
    assert claimed is not None
    return claimed


def test_an_unclaimed_message_is_claimed_again_first(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1", "1-abcd-2")
    before = spool.changes.count
    first = claim(spool)
    spool.unclaim(first)
    assert spool.changes.count == before + 2  # claimed, then back
    assert os.listdir(spool.root / "processing") == []
    assert sorted(os.listdir(spool.root / "inbox"))[0] == first.path.name
    assert spool.depth() == 2 and spool.knows("1-abcd-1")
    again = claim(spool)
    assert (again.envelope, again.sequence, again.verified) == (first.envelope, 1, True)
    spool.complete(again)
    assert claim(spool).envelope.message_id == "1-abcd-2"


def test_a_retry_of_an_unclaimed_message_stays_a_duplicate(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1")
    spool.unclaim(claim(spool))
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("duplicate", None)
    # A new spool object reads the same queue from the directories.
    reread = Spool(spool.root, max_queue=16)
    assert reread.depth() == 1 and claim(reread).envelope.message_id == "1-abcd-1"


def test_unclaim_refuses_what_is_not_being_processed(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1")
    claimed = claim(spool)
    foreign = Claimed(claimed.sequence, claimed.envelope, True, short_tmp / claimed.path.name)
    with pytest.raises(ValueError, match="not in this spool's processing directory"):
        spool.unclaim(foreign)
    spool.complete(claimed)
    with pytest.raises(RelayError, match="is not being processed"):
        spool.unclaim(claimed)  # settled: it must never run again
    assert spool.depth() == 0 and spool.claim() is None


def test_a_vanished_entry_is_reported_and_the_index_unchanged(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1")
    claimed = claim(spool)
    claimed.path.unlink()
    with pytest.raises(RelayError, match="in the queue: it is gone"):
        spool.unclaim(claimed)
    spool.complete(claimed)  # the caller settles it: nothing waits any more
    assert spool.depth() == 0 and spool.knows("1-abcd-1")


def test_an_inbox_that_cannot_be_written_is_reported(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1")
    claimed = claim(spool)

    def no_space(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "rename", no_space)
    with pytest.raises(RelayError, match="back in the queue: No space left on device"):
        spool.unclaim(claimed)
    monkeypatch.undo()
    assert claimed.path.exists() and spool.depth() == 1
    spool.complete(claimed)
    assert spool.depth() == 0


def test_unclaim_after_the_spool_was_removed_is_harmless(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    fill(spool, "1-abcd-1")
    claimed = claim(spool)
    spool.remove()
    spool.unclaim(claimed)
    assert spool.depth() == 0
