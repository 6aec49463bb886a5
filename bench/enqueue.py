"""Enqueue cost by queue depth: ``python -m bench.enqueue [--messages N]``.

A real receiver as the app wires it (``AgentBackend``, its ``RelayService`` on a real
socket, the ``TurnWorker`` following the relay's changes) is kept busy by a local turn
whose model never answers, so nothing it accepts is claimed and its queue only grows. Two
verified senders (other ``AgentBackend`` instances in the same Trio run, as real instances
send; one sender may fill only half of a queue) then deliver ``N`` messages in turn, one
after another; each ack's round trip includes what the receiver's foreground does per
accepted message (the worker takes the change in), since the listener and the worker
share one thread.

Printed: the median and p90 ack for the first 10 messages, messages 11-60 (the baseline
of the issue that asked for this) and the last 50, and the ratio of the last 50 to the
baseline. Flat in depth means a ratio near 1; the target is at most 1.5.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import trio
import trio.testing

from tests.agent.doubles import (
    HANG,
    FakeApprover,
    FakeSession,
    FakeStore,
    RecordingSink,
    ScriptedClient,
    make_config,
)
from zcoder.app.backend import AgentBackend
from zcoder.app.idle import IdleCommands
from zcoder.app.worker import TurnWorker
from zcoder.config import RelaySettings
from zcoder.ui.events import Intent, Prompt, WorkerEvent


def _backend(root: Path, name: str, client: ScriptedClient, max_queue: int) -> AgentBackend:
    workspace = root / name
    workspace.mkdir()
    runtime = root / f"rt-{name}"
    runtime.mkdir(mode=0o700)
    relay = RelaySettings(dir=root / "agents", max_queue=max_queue)
    config = make_config(workspace, relay=relay)
    return AgentBackend(
        config,
        cast(Any, FakeStore()),
        cast(Any, FakeSession(workspace)),
        cast(Any, client),
        runtime,
        approver=FakeApprover(),
        sink=RecordingSink(),
    )


async def _measure(root: Path, count: int) -> list[float]:
    async with trio.open_nursery() as nursery:
        senders = [_backend(root, name, ScriptedClient([]), 16) for name in ("alpha", "gamma")]
        receiver = _backend(root, "beta", ScriptedClient([[HANG]]), count)
        for backend in (*senders, receiver):
            assert await backend.start_relay(nursery) == ""
        intents_send, intents = trio.open_memory_channel[Intent](math.inf)
        events_send, events = trio.open_memory_channel[WorkerEvent](math.inf)
        worker = TurnWorker(
            receiver.runner,
            intents,
            events_send,
            commands=IdleCommands(receiver),
            warmup=False,
        )
        await nursery.start(worker.run)
        nursery.start_soon(_discard, events)
        intents_send.send_nowait(Prompt("a task that keeps the receiver busy"))
        await trio.testing.wait_all_tasks_blocked()
        target = receiver.relay.sending_from()[0]
        peers = [
            next(p for p in await s.sends.discover() if p.manifest.instance_id == target)
            for s in senders
        ]
        samples = []
        for n in range(count):
            sender, peer = senders[n % 2], peers[n % 2]
            start = time.perf_counter()
            ack = await sender.sends.deliver(peer, f"one-way task {n}")
            samples.append(time.perf_counter() - start)
            if ack.status != "accepted":
                raise SystemExit(f"message {n + 1} was answered {ack.status}")
        status = receiver.inbox.status()
        if status != ("on", count):
            raise SystemExit(f"the receiver reports {status}, expected ('on', {count})")
        nursery.cancel_scope.cancel()
    return samples


async def _discard(events: trio.MemoryReceiveChannel[WorkerEvent]) -> None:
    async for _ in events:
        pass


def _row(label: str, samples: list[float]) -> float:
    median = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1]
    print(f"  {label:<22} p50 {median * 1000:7.3f} ms   p90 {p90 * 1000:7.3f} ms")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="at most 1024")
    count = parser.parse_args().messages
    root = Path(tempfile.mkdtemp(prefix="zq", dir="/tmp"))
    try:
        samples = trio.run(_measure, root, count)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"enqueue ack round trip, two verified senders, busy receiver, {count} messages")
    _row("messages 1-10", samples[:10])
    base = _row("messages 11-60", samples[10:60])
    last = _row(f"messages {count - 49}-{count}", samples[-50:])
    print(f"  last 50 / messages 11-60: x{last / base:.2f} (target: at most x1.5)")


if __name__ == "__main__":
    main()
