"""A message whose receipt cannot be written is settled all the same (never waits again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.relay.helpers import make_enqueue
from zcoder.errors import RelayError
from zcoder.relay.spool.store import Spool


@pytest.mark.parametrize("broken", ["missing", "a file"])
def test_complete_settles_even_when_the_receipt_fails(short_tmp: Path, broken: str) -> None:
    spool = Spool(short_tmp / "relay", max_queue=4)
    spool.create()
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("accepted", 1)
    claimed = spool.claim()
    assert claimed is not None
    done = spool.root / "done"
    os.rmdir(done)
    if broken == "a file":
        done.write_bytes(b"")
    with pytest.raises(RelayError, match="cannot write the relay receipt of 1-abcd-1"):
        spool.complete(claimed)
    assert spool.depth() == 0 and spool.claim() is None
    assert not claimed.path.exists()
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("duplicate", None)


def test_complete_after_the_spool_is_gone_is_quiet(short_tmp: Path) -> None:
    spool = Spool(short_tmp / "relay", max_queue=4)
    spool.create()
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    claimed = spool.claim()
    assert claimed is not None
    spool.remove()
    spool.complete(claimed)  # no error: the relay shut down meanwhile
