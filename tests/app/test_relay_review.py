"""Relay edge cases found in review: a spool that fails to settle a message."""

from __future__ import annotations

import os
from pathlib import Path

import trio
import trio.testing

from tests.agent.doubles import HANG, text
from tests.app.test_relay_app import pair, send
from zcoder.agent.loop import STOP_MARKER


async def test_a_receipt_that_cannot_be_written_neither_crashes_nor_runs_again(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "once") == "accepted"
        done = short_tmp / "rt-beta" / "relay" / "done"
        os.rmdir(done)
        done.write_bytes(b"")  # not a directory: the receipt cannot be created (even as root)
        b.client.replies = [text("did it")]
        assert await b.backend.runner.run_relay_turn() is True
        # Settled all the same: nothing waits, nothing runs twice, no spin on a ghost; a
        # done/ that is not a directory is damage, so the relay goes, told once.
        assert b.backend.inbox.status() == ("unavailable", 0)
        assert not b.backend.runner.relay_runnable()
        assert await b.backend.runner.run_relay_turn() is False
        assert len(b.client.requests) == 1
        errors = b.errors()
        assert len(errors) == 1
        assert errors[0].startswith("Relay unavailable: the relay spool's done/ is not our own")


async def test_an_outer_cancel_mid_relayed_turn_settles_it_and_leaves_a_valid_history(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "long task") == "accepted"
        b.client.replies = [[HANG]]
        async with trio.open_nursery() as nursery:  # the app exiting mid-turn
            nursery.start_soon(b.backend.runner.run_relay_turn)
            await trio.testing.wait_all_tasks_blocked()
            assert len(b.client.requests) == 1
            nursery.cancel_scope.cancel()
        assert b.backend.inbox.status() == ("on", 0)
        assert await b.backend.runner.run_relay_turn() is False
        history = b.backend.agent.session.history
        assert [m.role for m in history] == ["user", "assistant"]
        assert history[-1].content == STOP_MARKER
        # A retry of the same message id is a duplicate: it never runs twice.
        spool = b.backend.relay.service.spool if b.backend.relay.service else None
        assert spool is not None and spool.knows(f"{a.id}-1")
