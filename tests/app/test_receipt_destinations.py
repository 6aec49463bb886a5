"""``ReceiptSender`` delivers per destination: real sockets, a live sender (a real
``Listener`` that takes receipts) and mute ones (they accept the connection and never
answer), all in this process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from tests.relay.helpers import make_manifest
from zcoder.app.relay.receipts import ReceiptSender
from zcoder.relay import client
from zcoder.relay.envelope import Cancel, Limits, Receipt
from zcoder.relay.listener import Listener, open_unix_listener
from zcoder.relay.paths import ensure_relay_dir, reserve_instance
from zcoder.relay.registry import publish_manifest


@attrs.frozen
class Ref:
    message_id: str
    sender_instance_id: str
    sender_pid: int


class _NoSpool:
    paused = False

    def enqueue(self, envelope: object, *, verified: bool) -> tuple[str, int | None]:
        raise AssertionError("receipts only")


def register(relay_dir: Path) -> str:
    """Reserve a sender id of this process and publish its manifest."""
    reservation = reserve_instance(relay_dir)
    iid = reservation.instance_id
    publish_manifest(reservation.manifest_path, make_manifest(relay_dir, iid))
    return iid


def ref(sender: str, n: int = 1) -> Ref:
    return Ref(client.new_message_id(sender, n), sender, os.getpid())


async def serve_live(
    nursery: trio.Nursery, relay_dir: Path, seen: list[str], *, knows: frozenset[str] | None = None
) -> str:
    """A sender whose listener takes receipts; each one's state goes to ``seen``. With
    ``knows``, it answers any other state ``invalid``, as a zcoder from before it did."""
    iid = register(relay_dir)

    def take(request: Receipt | Cancel, verified: bool) -> str:
        assert isinstance(request, Receipt)
        seen.append(request.state)
        return "invalid" if knows is not None and request.state not in knows else "accepted"

    listener = Listener(
        instance_id=iid,
        spool=_NoSpool(),
        sender_check=lambda _: True,
        state=lambda: "ready",
        limits=Limits(),
        io_timeout=5.0,
        extension=take,
    )
    trio_listener = await open_unix_listener(relay_dir / f"a-{iid}.sock")
    await nursery.start(listener.serve, [trio_listener])
    return iid


async def serve_mute(nursery: trio.Nursery, relay_dir: Path, held: list[trio.SocketStream]) -> str:
    """A sender that accepts every connection and never answers (``held`` keeps them)."""
    iid = register(relay_dir)
    trio_listener = await open_unix_listener(relay_dir / f"a-{iid}.sock")

    async def accept_forever() -> None:
        async with trio_listener:
            while True:
                held.append(await trio_listener.accept())

    nursery.start_soon(accept_forever)
    return iid


async def close_all(held: list[trio.SocketStream]) -> None:
    """Once the mute senders stopped accepting: close what they held."""
    for stream in held:
        await stream.aclose()


@asynccontextmanager
async def running(
    relay_dir: Path, io_timeout: float
) -> AsyncIterator[tuple[trio.Nursery, ReceiptSender]]:
    receiver = register(relay_dir)
    sender = ReceiptSender(
        me=lambda: receiver, relay_dir=lambda: relay_dir, io_timeout=io_timeout, max_bytes=65536
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.run)
        yield nursery, sender
        nursery.cancel_scope.cancel()


async def test_a_mute_sender_does_not_hold_up_a_live_senders_receipts(short_tmp: Path) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    seen: list[str] = []
    held: list[trio.SocketStream] = []
    async with running(relay_dir, io_timeout=5.0) as (nursery, sender):
        mute = await serve_mute(nursery, relay_dir, held)
        live = await serve_live(nursery, relay_dir, seen)
        sender.send(ref(mute), "started")  # queued first: the old single queue's head
        sender.send(ref(mute), "completed", "done")
        sender.send(ref(live), "started")
        sender.send(ref(live), "completed", "done")
        assert sender.stats.destinations == 2
        with trio.fail_after(10):
            while len(seen) < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
        # Both of the live sender's receipts arrived, in order, while the mute one still
        # holds its first receipt's connection open: nothing was dropped, nothing more sent.
        assert seen == ["started", "completed"]
        assert len(held) == 1 and sender.stats.dropped == 0
        assert sender.stats.delivered == 2
        assert sender.stats.destinations == 1  # the live one's task ended when idle
    await close_all(held)


async def test_mute_senders_time_out_side_by_side_each_within_its_own_bound(
    short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    held: list[trio.SocketStream] = []

    async def time_out(sender: ReceiptSender, mutes: list[str]) -> float:
        start = trio.current_time()
        for mute in mutes:
            sender.send(ref(mute), "started")
            sender.send(ref(mute), "completed")
        await sender.flush(1000.0)
        return trio.current_time() - start

    async with running(relay_dir, io_timeout=0.5) as (nursery, sender):
        mutes = [await serve_mute(nursery, relay_dir, held) for _ in range(3)]
        alone = await time_out(sender, mutes[:1])
        assert sender.stats.dropped == 2 and sender.stats.destinations == 0
        side_by_side = await time_out(sender, mutes)
        # Three destinations take as long as one (in order within each, at once across).
        assert side_by_side == pytest.approx(alone, abs=0.01)
        assert sender.stats.dropped == 8 and sender.stats.destinations == 0
        assert len(held) == 4 * 2 * 4  # every connection of every attempt was made
    await close_all(held)


async def test_flush_bounds_the_whole_exit_and_a_full_queue_drops(
    short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    held: list[trio.SocketStream] = []
    async with running(relay_dir, io_timeout=5.0) as (nursery, sender):
        mutes = [await serve_mute(nursery, relay_dir, held) for _ in range(2)]
        for n in range(70):  # the queue of one destination holds 64
            sender.send(ref(mutes[0], n + 1), "started")
        sender.send(ref(mutes[1]), "started")
        assert sender.stats.dropped == 6 and sender.stats.queued == 65
        start = trio.current_time()
        await sender.flush(3.0)
        assert trio.current_time() - start == pytest.approx(3.0)
        assert sender.stats.destinations == 2  # still trying, until cancelled
    await close_all(held)


async def test_receipts_sent_before_run_go_out_once_it_starts(short_tmp: Path) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    seen: list[str] = []
    receiver = register(relay_dir)
    sender = ReceiptSender(
        me=lambda: receiver, relay_dir=lambda: relay_dir, io_timeout=5.0, max_bytes=65536
    )
    async with trio.open_nursery() as nursery:
        live = await serve_live(nursery, relay_dir, seen)
        sender.send(ref(live), "started")
        sender.send(ref(live), "completed")
        assert not sender.alive
        nursery.start_soon(sender.run)
        await sender.flush(10.0)
        assert seen == ["started", "completed"] and sender.stats.destinations == 0
        nursery.cancel_scope.cancel()


async def test_a_sender_that_refuses_waiting_gets_no_more_of_it_and_all_else(
    short_tmp: Path,
) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    seen: list[str] = []
    old = frozenset({"held", "started", "completed"})  # a zcoder from before ``waiting``
    async with running(relay_dir, io_timeout=5.0) as (nursery, sender):
        older = await serve_live(nursery, relay_dir, seen, knows=old)
        message = ref(older)
        for state in ("started", "waiting", "started", "waiting", "started", "completed"):
            sender.send(message, state, "asks its user" if state == "waiting" else "")
        with trio.fail_after(10):
            while seen[-1:] != ["completed"]:  # noqa: ASYNC110
                await trio.sleep(0.01)
    # Refused once, ``waiting`` is not sent to it again; every other receipt still is (a
    # repeated ``started`` changes nothing there).
    assert seen == ["started", "waiting", "started", "started", "completed"]
    assert (sender.stats.delivered, sender.stats.dropped) == (4, 1)
