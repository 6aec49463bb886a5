"""The client against scripted servers on real Unix sockets: statuses, retry, failures."""

from __future__ import annotations

import gc
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.relay.wire_fakes import ME, SENDER, ack_frame, enqueue_env
from tests.relay.zsh_peer import zsh_ack, zsh_frame
from zcoder.errors import RelayTransportError
from zcoder.relay import wire
from zcoder.relay.client import finish_ping, new_message_id, ping, send, start_ping
from zcoder.relay.envelope import Ack
from zcoder.relay.listener import open_unix_listener
from zcoder.relay.protocol import FrameDecoder

MID = f"{SENDER}-1"
Script = Callable[[trio.SocketStream, bytes, int], Awaitable[None]]


async def read_request(stream: trio.SocketStream) -> bytes:
    decoder = FrameDecoder(max_bytes=65536)
    while True:
        chunk = await stream.receive_some(decoder.wanted())
        assert chunk, "the client hung up mid-frame"
        payload = decoder.feed(chunk)
        if payload is not None:
            return payload


@asynccontextmanager
async def scripted(path: Path, script: Script) -> AsyncIterator[list[bytes]]:
    """Serve ``path``; per connection read one request, then run ``script(stream, payload,
    n)`` with the connection's index. Yields the list of request payloads received."""
    seen: list[bytes] = []

    async def on_connection(stream: trio.SocketStream) -> None:
        payload = await read_request(stream)
        seen.append(payload)
        await script(stream, payload, len(seen) - 1)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, on_connection, [await open_unix_listener(path)])
        yield seen
        nursery.cancel_scope.cancel()


def answer(*frames: bytes) -> Script:
    """Connection n gets ``frames[n]`` (``b""``: closed without an answer)."""

    async def script(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        if frames[n]:
            await stream.send_all(frames[n])

    return script


async def test_send_returns_the_exact_status(short_tmp: Path) -> None:
    for status in ("accepted", "duplicate", "paused", "full", "invalid", "wrong_target"):
        path = short_tmp / f"{status}.sock"
        async with scripted(path, answer(ack_frame(MID, status))) as seen:
            ack = await send(path, enqueue_env(), io_timeout=5)
        assert ack == Ack(1, "ack", MID, status)
        assert len(seen) == 1
        assert json.loads(seen[0])["message_id"] == MID


@pytest.mark.parametrize(
    "status", ["duplicate", "paused", "full", "invalid", "wrong_target", "unsupported"]
)
async def test_send_judges_a_zsh_ack_by_its_status(short_tmp: Path, status: str) -> None:
    """The other implementation's acks carry ``queue_position`` 0 and ``state`` always."""
    path = short_tmp / "a.sock"
    mid = "" if status == "invalid" else MID
    reply = zsh_frame(zsh_ack(mid, status, state="paused"))
    async with scripted(path, answer(reply)):
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert ack == Ack(1, "ack", mid, status, None, "paused")


async def test_a_retry_answered_by_a_zsh_duplicate(short_tmp: Path) -> None:
    """Stored by the first attempt, which got no ack: the retry's ``duplicate`` says so."""
    path = short_tmp / "a.sock"
    async with scripted(path, answer(b"", zsh_frame(zsh_ack(MID, "duplicate")))) as seen:
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert (ack.status, ack.queue_position, ack.state) == ("duplicate", None, "ready")
    assert len(seen) == 2 and seen[0] == seen[1]


@pytest.mark.parametrize(
    "status",
    ["accepted", "duplicate", "paused", "full", "invalid", "wrong_target", "unsupported"],
)
async def test_the_retry_judges_a_zsh_ack_by_its_status(short_tmp: Path, status: str) -> None:
    path = short_tmp / "a.sock"
    position = 2 if status == "accepted" else 0
    reply = zsh_frame(zsh_ack(MID, status, queue_position=position))
    async with scripted(path, answer(b"", reply)) as seen:
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert (ack.status, ack.queue_position, ack.state) == (status, position or None, "ready")
    assert ack.stored is (status in ("accepted", "duplicate"))
    assert len(seen) == 2 and seen[0] == seen[1]


async def test_a_zsh_pong_to_an_enqueue_is_refused(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(zsh_frame(zsh_ack(MID, "pong")))):
        with pytest.raises(RelayTransportError, match="answered an enqueue with pong"):
            await send(path, enqueue_env(), io_timeout=5)


async def test_ping_takes_a_zsh_pong(short_tmp: Path) -> None:
    async def pong(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        reply = zsh_ack(json.loads(payload)["message_id"], "pong", state="busy")
        await stream.send_all(zsh_frame(reply))

    path = short_tmp / "a.sock"
    async with scripted(path, pong):
        ack = await ping(path, target_instance_id=ME, sender_instance_id=SENDER)
    assert (ack.status, ack.queue_position, ack.state) == ("pong", None, "busy")


async def test_send_carries_queue_position(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(ack_frame(MID, "accepted", queue_position=3))):
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert (ack.status, ack.queue_position) == ("accepted", 3)


@pytest.mark.parametrize(
    "first",
    [
        b"",  # read, then closed without an answer
        ack_frame(MID, "accepted")[:10],  # a partial header
        ack_frame(MID, "accepted")[:-3],  # a partial payload
    ],
)
async def test_retry_once_with_the_same_id(short_tmp: Path, first: bytes) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(first, ack_frame(MID, "duplicate"))) as seen:
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert ack.status == "duplicate"
    assert len(seen) == 2 and seen[0] == seen[1]


async def test_retry_after_a_reset(short_tmp: Path) -> None:
    """The first connection is closed with the request unread: the client sees a reset."""
    path = short_tmp / "a.sock"
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.bind(str(path))
    raw.listen(4)
    connections = 0

    async def server() -> None:
        nonlocal connections
        sock = trio.socket.from_stdlib_socket(raw)
        first, _ = await sock.accept()
        connections += 1
        await trio.sleep(0.05)  # let the request arrive, then drop it unread
        first.close()
        second, _ = await sock.accept()
        connections += 1
        stream = trio.SocketStream(second)
        await read_request(stream)
        await stream.send_all(ack_frame(MID, "accepted", queue_position=1))
        await stream.aclose()
        sock.close()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert (ack.status, connections) == ("accepted", 2)


async def test_gives_up_after_one_retry(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(b"", b"", ack_frame(MID, "accepted"))) as seen:
        with pytest.raises(RelayTransportError, match="after one retry"):
            await send(path, enqueue_env(), io_timeout=5)
    assert len(seen) == 2


async def test_stalled_receiver_times_out_twice(
    short_tmp: Path, autojump_clock: trio.abc.Clock
) -> None:
    async def stall(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        await trio.sleep_forever()

    path = short_tmp / "a.sock"
    async with scripted(path, stall) as seen:
        start = trio.current_time()
        with pytest.raises(RelayTransportError, match="no ack within the deadline"):
            await send(path, enqueue_env(), io_timeout=2)
        assert trio.current_time() - start == pytest.approx(4.0)
    assert len(seen) == 2


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\n", "malformed frame"),
        (b"ZCODER-AGENT/1 2\n{}", "invalid ack"),
        (ack_frame(MID, "maybe"), "invalid ack"),
        (ack_frame("someone-else-1", "accepted"), "not ours"),
        (ack_frame(MID, "pong", state="ready"), "answered an enqueue with pong"),
    ],
)
async def test_bad_answers_are_not_retried(short_tmp: Path, reply: bytes, message: str) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(reply, ack_frame(MID, "accepted"))) as seen:
        with pytest.raises(RelayTransportError, match=message):
            await send(path, enqueue_env(), io_timeout=5)
    assert len(seen) == 1


async def test_invalid_without_message_id_is_an_answer(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    async with scripted(path, answer(ack_frame("", "invalid"))):
        ack = await send(path, enqueue_env(), io_timeout=5)
    assert (ack.status, ack.message_id) == ("invalid", "")


async def test_missing_socket_is_not_retried(short_tmp: Path) -> None:
    with pytest.raises(RelayTransportError, match=r"cannot connect to .*No such file"):
        await send(short_tmp / "gone.sock", enqueue_env(), io_timeout=5)


async def test_refused_connection(short_tmp: Path) -> None:
    path = short_tmp / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(path))  # bound, never listening: a dead instance's socket file
        with pytest.raises(RelayTransportError, match=r"cannot connect to .*refused"):
            await send(path, enqueue_env(), io_timeout=5)


async def test_too_large_to_send(short_tmp: Path) -> None:
    with pytest.raises(RelayTransportError, match="too large"):
        await send(
            short_tmp / "gone.sock", enqueue_env(body="é" * 600), io_timeout=5, max_bytes=1024
        )


async def test_ping_returns_pong_with_state(short_tmp: Path) -> None:
    async def pong(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        request = json.loads(payload)
        assert set(request) == {
            "protocol",
            "type",
            "message_id",
            "target_instance_id",
            "sender_instance_id",
        }
        assert (request["type"], request["target_instance_id"]) == ("ping", ME)
        assert request["message_id"].startswith(f"{SENDER}-ping-")
        await stream.send_all(ack_frame(request["message_id"], "pong", state="busy"))

    path = short_tmp / "a.sock"
    async with scripted(path, pong):
        ack = await ping(path, target_instance_id=ME, sender_instance_id=SENDER)
    assert (ack.status, ack.state) == ("pong", "busy")


async def test_ping_failures(short_tmp: Path) -> None:
    async def wrong_target(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        await stream.send_all(ack_frame(json.loads(payload)["message_id"], "wrong_target"))

    path = short_tmp / "a.sock"
    async with scripted(path, wrong_target), scripted(short_tmp / "b.sock", answer(b"")):
        with pytest.raises(RelayTransportError, match="was answered wrong_target"):
            await ping(path, target_instance_id=ME, sender_instance_id=SENDER)
        with pytest.raises(RelayTransportError, match="closed before a complete ack"):
            await ping(short_tmp / "b.sock", target_instance_id=ME, sender_instance_id=SENDER)
    with pytest.raises(RelayTransportError, match="cannot connect"):
        await ping(path, target_instance_id=ME, sender_instance_id=SENDER)
    with pytest.raises(RelayTransportError, match="cannot ping"):
        await ping(path, target_instance_id="not an id", sender_instance_id=SENDER)


async def test_ping_started_at_once_then_finished(short_tmp: Path) -> None:
    async def pong(stream: trio.SocketStream, payload: bytes, n: int) -> None:
        await stream.send_all(ack_frame(json.loads(payload)["message_id"], "pong", state="ready"))

    path = short_tmp / "a.sock"
    async with scripted(path, pong) as seen:
        sock = wire.connect_nowait(path)
        assert sock is not None
        with trio.testing.assert_no_checkpoints():
            pending = start_ping(sock, target_instance_id=ME, sender_instance_id=SENDER)
        assert pending.unsent == b""  # a fresh connection takes the whole request at once
        ack = await finish_ping(pending)
        assert (ack.status, ack.state) == ("pong", "ready")
        assert sock.fileno() == -1  # closed
    assert len(seen) == 1
    assert json.loads(seen[0])["message_id"] == pending.request.message_id
    ours, theirs = socket.socketpair()
    with pytest.raises(RelayTransportError, match="cannot ping"):
        start_ping(ours, target_instance_id="not an id", sender_instance_id=SENDER)
    assert ours.fileno() == -1  # closed on failure too
    assert theirs.recv(100) == b""  # and nothing was sent
    theirs.close()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.close()
    with pytest.raises(RelayTransportError, match=r"ping to .* failed"):
        start_ping(ours, target_instance_id=ME, sender_instance_id=SENDER)
    assert ours.fileno() == -1


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_client_closes_every_connection(short_tmp: Path) -> None:
    # answered, malformed answer, no answer (timed out twice), reset, cannot connect,
    # cancelled by the caller: afterwards no descriptor of the client is left open
    mute = socket.socket(socket.AF_UNIX)
    mute.bind(os.fspath(short_tmp / "mute.sock"))
    mute.listen(8)
    path = short_tmp / "a.sock"
    replies = answer(ack_frame(MID, "accepted"), b"HTTP/1.0 200 OK\r\n", b"", b"")
    try:
        async with scripted(path, replies):
            gc.collect()  # earlier tests' garbage must not close descriptors meanwhile
            before = set(os.listdir("/proc/self/fd"))
            assert (await send(path, enqueue_env(), io_timeout=5)).status == "accepted"
            with pytest.raises(RelayTransportError, match="malformed frame"):
                await send(path, enqueue_env(), io_timeout=5)
            with pytest.raises(RelayTransportError, match="after one retry"):
                await send(path, enqueue_env(), io_timeout=5)  # closed unanswered, twice
            with pytest.raises(RelayTransportError, match="no ack within the deadline"):
                await send(short_tmp / "mute.sock", enqueue_env(), io_timeout=0.05)
            with pytest.raises(RelayTransportError, match="cannot connect"):
                await send(short_tmp / "gone.sock", enqueue_env(), io_timeout=5)
            with trio.move_on_after(0.05):
                await ping(short_tmp / "mute.sock", target_instance_id=ME, sender_instance_id=ME)
            assert set(os.listdir("/proc/self/fd")) - before == set()
    finally:
        mute.close()


def test_new_message_id() -> None:
    assert new_message_id(SENDER, 3) == f"{SENDER}-3"
    assert new_message_id("1-abcd", 0) == "1-abcd-0"
    for bad_id, counter in (("nope", 1), (SENDER, -1), (SENDER, True)):
        with pytest.raises(ValueError, match="cannot make a message id"):
            new_message_id(bad_id, counter)
    with pytest.raises(ValueError, match="too long"):
        new_message_id("1234567890-" + "a" * 32, 10**60)
