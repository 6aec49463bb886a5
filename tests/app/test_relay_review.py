"""Relay edge cases found in review: a spool that fails to settle a message."""

from __future__ import annotations

import os
from pathlib import Path

from tests.agent.doubles import text
from tests.app.test_relay_app import pair, send


async def test_a_receipt_that_cannot_be_written_neither_crashes_nor_runs_again(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "once") == "accepted"
        done = short_tmp / "rt-beta" / "relay" / "done"
        os.rmdir(done)
        done.write_bytes(b"")  # not a directory: the receipt cannot be created (even as root)
        b.client.replies = [text("did it")]
        assert await b.backend.run_relay_turn() is True
        # Settled all the same: nothing waits, nothing runs twice, no spin on a ghost.
        assert b.backend.relay_status() == ("on", 0)
        assert not b.backend.relay_waiting()
        assert await b.backend.run_relay_turn() is False
        assert len(b.client.requests) == 1
        errors = [e.text for e in b.sink.entries() if e.role == "error"]
        assert len(errors) == 1 and "relay" in errors[0]
