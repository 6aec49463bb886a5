"""Interop with the other (Zsh) implementation, from the literal bytes of
``../shared/spec/wire-peers.md``: its acks, pings, enqueues and manifests, on the discovery,
send and retry paths, with the stand-in peer of ``tests/relay/zsh_peer.py`` on real sockets
and in real processes."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.relay.helpers import PeerProcess, make_enqueue, register_sender
from tests.relay.zsh_peer import ZshPeer, zsh_ack, zsh_frame
from zcoder.relay import client
from zcoder.relay.discovery import discover
from zcoder.relay.envelope import Ack, decode_ack
from zcoder.relay.paths import ensure_relay_dir
from zcoder.relay.protocol import FrameDecoder

# The spec's eight ack lines, verbatim.
LITERAL_ACKS = [
    b'{"protocol":1,"type":"ack","message_id":"ping-1","status":"pong","queue_position":0,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-1","status":"accepted","queue_position":1,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-1","status":"duplicate","queue_position":0,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-2","status":"paused","queue_position":0,"state":"paused"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-3","status":"full","queue_position":0,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"","status":"invalid","queue_position":0,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-4","status":"wrong_target","queue_position":0,"state":"ready"}',
    b'{"protocol":1,"type":"ack","message_id":"4242-py-5","status":"unsupported","queue_position":0,"state":"ready"}',
]  # fmt: skip
LITERAL_HEADER = b"ZCODER-AGENT/1 100\n"
NOT_POSITIVE = ["duplicate", "paused", "full", "invalid", "wrong_target", "unsupported"]
NOT_PONG = ["accepted", *NOT_POSITIVE]


@pytest.fixture
def relay_dir(short_tmp: Path) -> Path:
    return ensure_relay_dir(short_tmp / "agents")


@pytest.fixture
def zsh(relay_dir: Path) -> Iterator[ZshPeer]:
    with ZshPeer(relay_dir, state="busy", project="digest-zsh") as peer:
        yield peer


# -- the literal frames -------------------------------------------------------------------


@pytest.mark.parametrize("literal", LITERAL_ACKS)
def test_the_stand_in_writes_the_literal_acks(literal: bytes) -> None:
    obj = json.loads(literal)
    fields = {k: obj[k] for k in ("queue_position", "state")}
    assert zsh_ack(obj["message_id"], obj["status"], **fields) == literal


def test_the_literal_pong_frame() -> None:
    assert zsh_frame(LITERAL_ACKS[0]) == LITERAL_HEADER + LITERAL_ACKS[0]
    decoder = FrameDecoder(max_bytes=65536)
    assert decoder.feed(LITERAL_HEADER + LITERAL_ACKS[0]) == LITERAL_ACKS[0]


@pytest.mark.parametrize("literal", LITERAL_ACKS)
def test_literal_acks_are_judged_by_their_status(literal: bytes) -> None:
    obj = json.loads(literal)
    ack = decode_ack(literal)
    position = 1 if obj["status"] == "accepted" else None  # 0 on any other status: ignored
    assert ack == Ack(1, "ack", obj["message_id"], obj["status"], position, obj["state"])


# -- discovery: the ping path ---------------------------------------------------------------


def test_the_stand_in_publishes_what_the_spec_says(relay_dir: Path, zsh: ZshPeer) -> None:
    data = zsh.manifest_path.read_bytes()
    assert not data.endswith(b"\n")
    assert list(json.loads(data)) == [
        "protocol",
        "instance_id",
        "pid",
        "project",
        "workspace",
        "session_id",
        "profile",
        "model",
        "socket",
        "state",
        "started_at",
    ]
    assert stat.S_IMODE(os.lstat(zsh.manifest_path).st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(relay_dir).st_mode) == 0o700
    pid, nonce = zsh.instance_id.split("-")
    assert (int(pid), len(nonce)) == (zsh.pid, 20)


async def test_discovery_lists_a_zsh_peer(relay_dir: Path, zsh: ZshPeer) -> None:
    [peer] = await discover(relay_dir, exclude_instance_id=None, io_timeout=5)
    m = peer.manifest
    assert (m.instance_id, m.pid, m.project, m.workspace) == (
        zsh.instance_id,
        zsh.pid,
        "digest-zsh",
        "/work/zsh-project",
    )
    assert peer.state == "busy"  # from its pong, which carries queue_position 0
    [(request, answer)] = zsh.requests()
    assert answer == "pong"
    assert json.loads(request)["type"] == "ping"


async def test_discovery_of_a_newer_peer_with_more_manifest_keys(relay_dir: Path) -> None:
    extra = {"agent_name": "digest", "capabilities": "receipts", "limits": 3}
    with ZshPeer(relay_dir, manifest_extra=extra) as newer:
        [peer] = await discover(relay_dir, exclude_instance_id=None, io_timeout=5)
    assert peer.manifest.instance_id == newer.instance_id


async def test_only_pong_makes_a_peer_and_the_log_says_why(
    relay_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="zcoder.relay.registry")
    with ExitStack() as stack:
        others = {
            stack.enter_context(ZshPeer(relay_dir, ping_status=s)).instance_id: s for s in NOT_PONG
        }
        live = stack.enter_context(ZshPeer(relay_dir))
        peers = await discover(relay_dir, exclude_instance_id=None, io_timeout=5)
    assert [p.manifest.instance_id for p in peers] == [live.instance_id]
    lines = [r.getMessage() for r in caplog.records if r.name == "zcoder.relay.registry"]
    for instance_id, status in others.items():
        [line] = [line for line in lines if instance_id in line]
        assert f"answered {status}" in line
        assert len(line) <= 300


# -- the send path and the one retry ------------------------------------------------------


async def test_send_to_a_zsh_peer_every_status(relay_dir: Path) -> None:
    sender = register_sender(relay_dir)
    with ExitStack() as stack:
        peers = {s: stack.enter_context(ZshPeer(relay_dir, status=s)) for s in NOT_POSITIVE}
        for status, peer in peers.items():
            mid = f"{sender.instance_id}-{status}"
            env = make_enqueue(mid, target=peer.instance_id, sender=sender.instance_id)
            ack = await client.send(peer.socket, env, io_timeout=5)
            assert (ack.status, ack.message_id, ack.queue_position) == (status, mid, None)
            assert ack.stored is (status == "duplicate")


async def test_send_accepted_then_duplicate(relay_dir: Path, zsh: ZshPeer) -> None:
    sender = register_sender(relay_dir)
    env = make_enqueue(f"{sender.instance_id}-1", target=zsh.instance_id, sender=sender.instance_id)
    first = await client.send(zsh.socket, env, io_timeout=5)
    assert (first.status, first.queue_position, first.state) == ("accepted", 1, "busy")
    assert first.stored
    again = await client.send(zsh.socket, env, io_timeout=5)
    assert (again.status, again.queue_position) == ("duplicate", None)


async def test_a_retry_answered_duplicate_means_stored(relay_dir: Path) -> None:
    sender = register_sender(relay_dir)
    with ZshPeer(relay_dir, drop_first=True) as peer:
        mid = f"{sender.instance_id}-1"
        env = make_enqueue(mid, target=peer.instance_id, sender=sender.instance_id)
        ack = await client.send(peer.socket, env, io_timeout=5)
        assert (ack.status, ack.message_id, ack.queue_position) == ("duplicate", mid, None)
        assert ack.stored
        [(first, dropped), (second, answered)] = peer.requests()
    assert (dropped, answered) == (None, "duplicate")
    assert first == second  # the same envelope, so the same message id


def test_a_zcoder_instance_lists_and_sends_to_a_zsh_peer(
    relay_dir: Path, short_tmp: Path, zsh: ZshPeer
) -> None:
    with PeerProcess(relay_dir, "zcoder-side", short_tmp) as ours:
        assert ours.command("peers") == f"PEERS {zsh.instance_id}"
        mid = f"{ours.instance_id}-1"
        body = json.dumps("rename users.name -> users.display_name in src/a/b.ts ✓")
        assert ours.command(f"send {zsh.instance_id} {mid} {body}") == "ACK accepted 1"
    payload, answer = zsh.requests()[-1]
    assert answer == "accepted"
    assert list(json.loads(payload)) == [
        "protocol",
        "type",
        "message_id",
        "target_instance_id",
        "sender_instance_id",
        "sender_pid",
        "sender_project",
        "sender_workspace",
        "body",
        "created_at",
        "hops",  # zcoder's optional key, after the spec's ten: the Zsh peer ignores it
    ]
    assert json.loads(payload)["hops"] == 0  # a person's /send, not a relayed turn


# -- what a Zsh peer sends us ---------------------------------------------------------------


def test_a_zsh_peer_pings_and_sends_to_zcoder(
    relay_dir: Path, short_tmp: Path, zsh: ZshPeer
) -> None:
    with PeerProcess(relay_dir, "zcoder-side", short_tmp) as ours:
        pong = zsh.command(f"ping {ours.socket} {ours.instance_id} observer")
        assert pong.startswith("ACK ")
        assert json.loads(pong[4:])["status"] == "pong"
        assert zsh.command(f"ping {ours.socket} {ours.instance_id}").startswith("ACK ")
        assert ours.command("depth") == "DEPTH 0"  # pings never touch the queue
        body = 'raw UTF-8 ✓ émoji 🎉, a/b/c path, "quotes" and a\nnewline'
        ack = zsh.command(f"send {ours.socket} {ours.instance_id} {json.dumps(body)}")
        assert json.loads(ack[4:]) == {
            "protocol": 1,
            "type": "ack",
            "message_id": f"{zsh.instance_id}-1",
            "status": "accepted",
            "queue_position": 1,
        }
        turn = ours.command("claim").split(" ", 4)
    assert turn[:3] == ["TURN", turn[1], f"{zsh.instance_id}-1"]
    assert json.loads(turn[4]) == body


async def test_a_message_id_belongs_to_its_sender(
    relay_dir: Path, short_tmp: Path, zsh: ZshPeer
) -> None:
    """Sender A cannot take B's next message id: ``<B>-1`` from A is ``invalid``, and B's
    own ``<B>-1`` is then accepted, not answered ``duplicate``."""
    a = register_sender(relay_dir)
    with PeerProcess(relay_dir, "receiver", short_tmp) as receiver:
        stolen = make_enqueue(
            f"{zsh.instance_id}-1", target=receiver.instance_id, sender=a.instance_id
        )
        ack = await client.send(receiver.socket, stolen, io_timeout=5)
        assert (ack.status, ack.message_id) == ("invalid", f"{zsh.instance_id}-1")
        own = zsh.command(f"send {receiver.socket} {receiver.instance_id} {json.dumps('mine')}")
        assert json.loads(own[4:])["status"] == "accepted"
        assert receiver.command("depth") == "DEPTH 1"
