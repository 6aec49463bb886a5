"""A relayed task too large for the receiver's context window is settled ``failed`` with
the reason, never left waiting as if the model were down.

Two real relay services in one Trio run (as ``test_relay_model_down.py``); the receiver's
model is the fake OpenAI-compatible server playing llama.cpp with a 4,096-token window,
which it either reports (zcoder refuses the task before sending it) or does not (the
server refuses it with its own error, and zcoder compacts and tries once more).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.app.test_relay_model_down import Receiver, receiver_on, send, sender
from tests.app.test_relay_receipts import only_id, receipts, reported
from tests.fakes.openai_server import FakeOpenAI
from zcoder.agent.model import StallLimits
from zcoder.agent.openai import OpenAIClient

WINDOW = 4096
TASK = "Review this log and say what failed:\n" + "E  assert response.status == 200\n" * 400


@asynccontextmanager
async def receiver(nursery: trio.Nursery, root: Path, url: str) -> AsyncIterator[Receiver]:
    async with OpenAIClient(url, connect_seconds=2) as probe:
        kind, _ = await probe.identify()  # as zcoder does at start: the server's kind
    assert kind is not None
    async with OpenAIClient(url, kind=kind, stall=StallLimits(5, 5), connect_seconds=2) as client:
        yield await receiver_on(nursery, root, url, client)


@pytest.mark.parametrize("report", [True, False], ids=["reported", "refused-by-server"])
async def test_a_task_larger_than_the_window_is_settled_failed(
    report: bool, short_tmp: Path
) -> None:
    answer = {"chunks": [{"content": "ok"}]}
    with FakeOpenAI({"responses": [answer]}, window=WINDOW, report_window=report) as fake:
        async with trio.open_nursery() as nursery:
            a = await sender(nursery, short_tmp)
            async with receiver(nursery, short_tmp, fake.url + "/v1") as b:
                assert await send(a, b, TASK) == "accepted"
                mid = only_id(a)
                assert await b.backend.runner.run_relay_turn() is True
                await reported(a, mid, "failed")
                # Settled: not first in the queue again, not waiting for the model.
                assert b.backend.inbox.status() == ("on", 0) and os.listdir(b.inbox) == []
                assert not b.backend.inbox.waits_for_model() and b.backend.inbox.unrun() == []
                assert not any("stays first in the queue" in line for line in b.system_lines())
                # The receiver goes on: a small task after it runs.
                assert await send(a, b, "say ok") == "accepted"
                second = next(
                    m for m in a.backend.sends.outbox.outbox.entries() if m.message_id != mid
                )
                assert await b.backend.runner.run_relay_turn() is True
                await reported(a, second.message_id, "completed")
                assert b.backend.inbox.status() == ("on", 0)
                nursery.cancel_scope.cancel()
    (failed,) = [
        r for r in receipts(a) if r.meta["message_id"] == mid and r.meta["receipt"] != "started"
    ]
    assert failed.meta["receipt"] == "failed"
    reason = f"does not fit the model's {WINDOW:,}-token context window, even compacted"
    assert reason in failed.meta["headline"]
    # Refused before the server saw it, or by the server (whose count zcoder then used).
    assert fake.outcomes.count("context_exceeded") == (0 if report else 1)
