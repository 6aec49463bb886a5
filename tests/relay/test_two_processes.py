"""Two (or three) real OS processes talking over the relay: the test process and
``python -m tests.relay.helpers`` children, each with its own runtime dir, sharing one
relay directory."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.relay.helpers import PeerProcess, make_enqueue, register_sender
from zcoder.errors import RelayTransportError
from zcoder.relay import client
from zcoder.relay.discovery import discover
from zcoder.relay.paths import ensure_relay_dir
from zcoder.relay.registry import Manifest


@pytest.fixture
def relay_dir(short_tmp: Path) -> Path:
    return ensure_relay_dir(short_tmp / "agents")


@pytest.fixture
def receiver(relay_dir: Path, short_tmp: Path) -> Iterator[PeerProcess]:
    with PeerProcess(relay_dir, "receiver", short_tmp) as peer:
        yield peer


@pytest.fixture
def sender(relay_dir: Path) -> Manifest:
    """The test process as a registered sender (a manifest naming our live pid)."""
    return register_sender(relay_dir)


def turns(peer: PeerProcess) -> list[tuple[str, str, str]]:
    """Claim until empty: (message id, verified, body) per turn, in claim order."""
    out = []
    while (line := peer.command("claim")) != "EMPTY":
        word, _seq, mid, verified, body = line.split(" ", 4)
        assert word == "TURN"
        out.append((mid, verified, json.loads(body)))
    return out


async def send(peer: PeerProcess, sender: Manifest, mid: str, body: str = "task") -> str:
    env = make_enqueue(mid, target=peer.instance_id, sender=sender.instance_id, body=body)
    ack = await client.send(peer.socket, env, io_timeout=2)
    return f"{ack.status} {ack.queue_position or '-'}"


async def test_two_services_discover_ping_and_enqueue(relay_dir: Path, short_tmp: Path) -> None:
    (short_tmp / "a").mkdir()
    (short_tmp / "b").mkdir()
    with (
        PeerProcess(relay_dir, "alpha", short_tmp / "a") as a,
        PeerProcess(relay_dir, "beta", short_tmp / "b") as b,
    ):
        assert a.command("peers") == f"PEERS {b.instance_id}"
        assert b.command("peers") == f"PEERS {a.instance_id}"
        body = json.dumps('rename users.name -> users.display_name\n\t"quoted" \\ *.py ü')
        assert a.command(f"send {b.instance_id} {a.instance_id}-1 {body}") == "ACK accepted 1"
        assert a.command(f"send {b.instance_id} {a.instance_id}-1 {body}") == "ACK duplicate -"
        [(mid, verified, text)] = turns(b)
        assert (mid, verified, text) == (f"{a.instance_id}-1", "True", json.loads(body))
        assert turns(a) == []
        # a target that does not exist: a transport error, reported as such
        missing = b.command(f"send 1-nobody {b.instance_id}-9 {json.dumps('x')}")
        assert missing.startswith("ERROR cannot connect")
        peers = await discover(relay_dir, exclude_instance_id=None, io_timeout=2)
        assert [(p.manifest.project, p.manifest.pid) for p in peers] == [
            ("alpha", a.pid),
            ("beta", b.pid),
        ]


async def test_unregistered_sender_is_invalid(receiver: PeerProcess) -> None:
    env = make_enqueue(
        f"{os.getpid()}-ghost-1", target=receiver.instance_id, sender=f"{os.getpid()}-ghost"
    )
    ack = await client.send(receiver.socket, env, io_timeout=2)
    assert ack.status == "invalid"
    assert turns(receiver) == []


async def test_fifo_under_a_busy_receiver(receiver: PeerProcess, sender: Manifest) -> None:
    # The receiver claims nothing while we send: it is busy with another turn.
    results = [await send(receiver, sender, f"{sender.instance_id}-{i}", f"t{i}") for i in range(5)]
    assert results == ["accepted 1", "accepted 2", "accepted 3", "accepted 4", "accepted 5"]
    assert receiver.command("depth") == "DEPTH 5"
    got = turns(receiver)
    assert [body for _, _, body in got] == ["t0", "t1", "t2", "t3", "t4"]
    assert {verified for _, verified, _ in got} == {"True"}
    assert receiver.command("depth") == "DEPTH 0"


async def test_concurrent_duplicates_execute_at_most_once(
    receiver: PeerProcess, sender: Manifest
) -> None:
    statuses: list[str] = []

    async def one() -> None:
        statuses.append(await send(receiver, sender, f"{sender.instance_id}-7"))

    async with trio.open_nursery() as nursery:
        for _ in range(12):
            nursery.start_soon(one)
    assert sorted(statuses) == ["accepted 1"] + ["duplicate -"] * 11
    assert len(turns(receiver)) == 1
    assert await send(receiver, sender, f"{sender.instance_id}-7") == "duplicate -"  # in done/
    assert turns(receiver) == []


async def test_a_senders_share_of_the_queue(
    relay_dir: Path, short_tmp: Path, sender: Manifest
) -> None:
    # One sender may fill half of the queue: 2 of 4.
    with PeerProcess(relay_dir, "small", short_tmp, "--max-queue", "4") as peer:
        assert await send(peer, sender, f"{sender.instance_id}-1") == "accepted 1"
        assert await send(peer, sender, f"{sender.instance_id}-2") == "accepted 2"
        assert await send(peer, sender, f"{sender.instance_id}-3") == "full -"
        assert peer.command("claim").startswith(f"TURN 1 {sender.instance_id}-1 ")
        assert await send(peer, sender, f"{sender.instance_id}-3") == "accepted 2"
        assert [mid for mid, _, _ in turns(peer)] == [
            f"{sender.instance_id}-2",
            f"{sender.instance_id}-3",
        ]


async def test_pause_and_resume(receiver: PeerProcess, sender: Manifest) -> None:
    assert await send(receiver, sender, f"{sender.instance_id}-1") == "accepted 1"
    assert receiver.command("pause") == "OK"
    assert await send(receiver, sender, f"{sender.instance_id}-2") == "paused -"
    assert await send(receiver, sender, f"{sender.instance_id}-1") == "duplicate -"
    ping = await client.ping(
        receiver.socket,
        target_instance_id=receiver.instance_id,
        sender_instance_id=sender.instance_id,
    )
    assert ping.state == "paused"
    assert [mid for mid, _, _ in turns(receiver)] == [f"{sender.instance_id}-1"]
    assert receiver.command("resume") == "OK"
    assert await send(receiver, sender, f"{sender.instance_id}-2") == "accepted 1"
    assert [mid for mid, _, _ in turns(receiver)] == [f"{sender.instance_id}-2"]


async def test_started_paused(relay_dir: Path, short_tmp: Path, sender: Manifest) -> None:
    with PeerProcess(relay_dir, "paused", short_tmp, "--paused") as peer:
        assert await send(peer, sender, f"{sender.instance_id}-1") == "paused -"
        peer.command("resume")
        assert await send(peer, sender, f"{sender.instance_id}-1") == "accepted 1"


async def test_receiver_exit_then_transport_error_and_no_peer(
    relay_dir: Path, receiver: PeerProcess, sender: Manifest
) -> None:
    assert await send(receiver, sender, f"{sender.instance_id}-1") == "accepted 1"
    assert receiver.close() == 0
    assert sorted(n for n in os.listdir(relay_dir) if n.endswith(".sock")) == []
    with pytest.raises(RelayTransportError, match="cannot connect"):
        await send(receiver, sender, f"{sender.instance_id}-2")
    assert await discover(relay_dir, exclude_instance_id=sender.instance_id, io_timeout=2) == []


async def test_receiver_crash_leaves_a_stale_entry_that_is_skipped(
    relay_dir: Path, receiver: PeerProcess, sender: Manifest
) -> None:
    receiver.kill()  # SIGKILL: no cleanup, manifest and socket file stay behind
    names = set(os.listdir(relay_dir))
    assert {f"a-{receiver.instance_id}.json", receiver.socket.name} <= names
    with pytest.raises(RelayTransportError, match="cannot connect"):
        await send(receiver, sender, f"{sender.instance_id}-1")
    assert await discover(relay_dir, exclude_instance_id=sender.instance_id, io_timeout=2) == []


async def test_sender_timeout_then_retry_with_the_same_id(
    receiver: PeerProcess, sender: Manifest
) -> None:
    mid = f"{sender.instance_id}-1"
    env = make_enqueue(mid, target=receiver.instance_id, sender=sender.instance_id)
    os.kill(receiver.pid, signal.SIGSTOP)  # the receiver stalls: connects, never answers
    try:
        with pytest.raises(RelayTransportError, match="after one retry"):
            await client.send(receiver.socket, env, io_timeout=0.3)
    finally:
        os.kill(receiver.pid, signal.SIGCONT)
    # Ambiguous: the stalled attempts may still be stored once the receiver runs again.
    ack = await client.send(receiver.socket, env, io_timeout=5)
    assert ack.status in ("accepted", "duplicate")
    assert (await client.send(receiver.socket, env, io_timeout=5)).status == "duplicate"
    assert [m for m, _, _ in turns(receiver)] == [mid]
