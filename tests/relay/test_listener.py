"""The listener, one connection at a time over memory streams, then over real sockets."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.relay.wire_fakes import (
    ME,
    SENDER,
    FakeSpool,
    SenderCheck,
    ack_frame,
    enqueue_env,
    enqueue_obj,
    frame,
    make_listener,
    ping_obj,
)
from zcoder.errors import RelayTransportError, RelayUnavailable
from zcoder.relay import client, wire
from zcoder.relay.envelope import Ack, Limits
from zcoder.relay.listener import Listener, PeerCred, open_unix_listener, peer_credentials

MID = "42110-18471001-1"


async def exchange(
    listener: Listener, data: bytes, *, peer: PeerCred | None = None, eof: bool = True
) -> bytes:
    """Send ``data`` to one ``handle`` call; return everything it wrote before closing."""
    ours, theirs = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(listener.handle, theirs, peer)
        await ours.send_all(data)
        if eof:
            await ours.send_eof()
        reply = bytearray()
        while chunk := await ours.receive_some():
            reply += chunk
    return bytes(reply)


async def test_ping_gets_pong_with_state() -> None:
    listener = make_listener()
    assert await exchange(listener, frame(ping_obj())) == ack_frame("p1", "pong", state="ready")
    stats = listener.statistics()
    assert (stats.handled, stats.answered, stats.dropped, stats.active) == (1, 1, 0, 0)


async def test_enqueue_accepted_and_spooled() -> None:
    spool = FakeSpool()
    listener = make_listener(spool)
    reply = await exchange(listener, frame(enqueue_obj()))
    assert reply == ack_frame(MID, "accepted", queue_position=1)
    assert len(spool.items) == 1
    envelope, verified = spool.items[0]
    assert envelope.message_id == MID and verified is False


@pytest.mark.parametrize(("pid", "verified"), [(42110, True), (42111, False)])
async def test_verified_when_peer_pid_is_sender_pid(pid: int, verified: bool) -> None:
    spool = FakeSpool()
    peer = PeerCred(pid=pid, uid=os.getuid(), gid=os.getgid())
    await exchange(make_listener(spool), frame(enqueue_obj()), peer=peer)
    assert spool.items[0][1] is verified


async def test_spool_statuses_pass_through() -> None:
    spool = FakeSpool(max_queue=1)
    listener = make_listener(spool)
    assert await exchange(listener, frame(enqueue_obj())) == ack_frame(
        MID, "accepted", queue_position=1
    )
    assert await exchange(listener, frame(enqueue_obj())) == ack_frame(MID, "duplicate")
    second = enqueue_obj(message_id=f"{SENDER}-2")
    assert await exchange(listener, frame(second)) == ack_frame(f"{SENDER}-2", "full")
    spool.paused = True
    assert await exchange(listener, frame(second)) == ack_frame(f"{SENDER}-2", "paused")
    assert [env.message_id for env, _ in spool.items] == [MID]


async def test_sender_check_after_fields_before_spool() -> None:
    spool, check = FakeSpool(), SenderCheck()
    check.result = False
    listener = make_listener(spool, check)
    assert await exchange(listener, frame(enqueue_obj())) == ack_frame(MID, "invalid")
    assert (check.calls, spool.items) == (1, [])
    # earlier steps decide without asking the sender check
    assert await exchange(listener, frame(enqueue_obj(body=""))) == ack_frame(MID, "invalid")
    bad_target = frame(enqueue_obj(target_instance_id="1-abcd", body=""))
    assert await exchange(listener, bad_target) == ack_frame(MID, "wrong_target")
    assert check.calls == 1
    # a ping needs no sender check
    assert await exchange(listener, frame(ping_obj())) == ack_frame("p1", "pong", state="ready")
    assert check.calls == 1


async def test_invalid_fields_answered_with_message_id() -> None:
    listener = make_listener()
    assert await exchange(listener, frame(enqueue_obj(sender_pid="42110"))) == ack_frame(
        MID, "invalid"
    )
    assert await exchange(listener, frame(enqueue_obj(protocol=2))) == ack_frame(MID, "unsupported")
    assert await exchange(listener, frame(enqueue_obj(body="b" * 101))) == ack_frame(MID, "invalid")


@pytest.mark.parametrize(
    "data",
    [
        b"ZCODER-AGENT/1 0\n",
        b"ZCODER-AGENT/1 8\nnot json",
        b"ZCODER-AGENT/1 2\n[]",
        b"ZCODER-AGENT/1 x\n",
        b"ZCODER-AGENT/1 05\n{}",
        b"ZCODER-AGENT/1 4097\n",  # above max_bytes: refused before the payload
        b"ZCODER-AGENT/1 2\n{}trailing",
    ],
)
async def test_our_magic_but_broken_frame_gets_invalid(data: bytes) -> None:
    listener = make_listener()
    assert await exchange(listener, data) == ack_frame("", "invalid")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"GET / HTTP/1.1\r\n\r\n",
        b"\x00\x01\x02",
        b"ZCODER-AGENT/2 2\n{}",
        b"ZCODER-AGENT/1",  # EOF inside the header
        b"ZCODER-AGENT/1 10\n",  # EOF before the payload
        b'ZCODER-AGENT/1 10\n{"a":',  # EOF inside the payload
    ],
)
async def test_foreign_or_truncated_frame_closes_without_answer(data: bytes) -> None:
    listener = make_listener()
    assert await exchange(listener, data) == b""
    stats = listener.statistics()
    assert (stats.answered, stats.dropped, stats.errors) == (0, 1, 0)


async def test_stalled_header_closed_after_io_timeout(autojump_clock: trio.abc.Clock) -> None:
    listener = make_listener(io_timeout=2.0)
    start = trio.current_time()
    assert await exchange(listener, b"ZCODER-AGENT/1 1", eof=False) == b""
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_slow_drip_bounded_by_one_deadline(autojump_clock: trio.abc.Clock) -> None:
    """One byte every half second never completes: the deadline covers the whole frame."""
    listener = make_listener(io_timeout=2.0)
    ours, theirs = trio.testing.memory_stream_pair()
    data = frame(ping_obj())
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(listener.handle, theirs, None)
        for i in range(len(data)):
            try:
                await ours.send_all(data[i : i + 1])
            except trio.BrokenResourceError:
                break
            await trio.sleep(0.5)
        assert await ours.receive_some() == b""
    assert trio.current_time() - start <= 2.5
    assert listener.statistics().dropped == 1


async def test_peer_that_never_reads_the_ack(autojump_clock: trio.abc.Clock) -> None:
    listener = make_listener(io_timeout=2.0)
    ours, theirs = trio.testing.lockstep_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(listener.handle, theirs, None)
        await ours.send_all(frame(ping_obj()))
    stats = listener.statistics()
    assert (stats.answered, stats.dropped, stats.errors) == (0, 1, 0)


def socket_streams() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair(socket.AF_UNIX)
    return trio.SocketStream(a), trio.SocketStream(b)


async def test_peer_that_hangs_up_before_the_ack() -> None:
    spool = FakeSpool()
    listener = make_listener(spool)
    ours, theirs = socket_streams()
    await ours.send_all(frame(enqueue_obj()))
    await ours.aclose()
    await listener.handle(theirs, None)
    stats = listener.statistics()
    assert (stats.answered, stats.dropped, stats.errors) == (0, 1, 0)
    assert len(spool.items) == 1  # stored: the sender's retry will get "duplicate"


async def test_spool_failure_is_contained() -> None:
    spool = FakeSpool()
    spool.fail = True
    listener = make_listener(spool)
    assert await exchange(listener, frame(enqueue_obj())) == b""
    assert listener.statistics().errors == 1
    spool.fail = False
    assert await exchange(listener, frame(enqueue_obj())) == ack_frame(
        MID, "accepted", queue_position=1
    )


async def test_handle_propagates_cancellation() -> None:
    listener = make_listener()
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listener.handle, theirs, None)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert await ours.receive_some() == b""  # closed on the way out


async def test_peer_credentials_of_a_unix_socket() -> None:
    ours, theirs = socket_streams()
    async with ours, theirs:
        assert peer_credentials(theirs) == PeerCred(
            pid=os.getpid(), uid=os.getuid(), gid=os.getgid()
        )
    assert peer_credentials(trio.testing.memory_stream_pair()[0]) is None


# -- real sockets --------------------------------------------------------------------------


@asynccontextmanager
async def serving(listener: Listener, path: Path) -> AsyncIterator[Path]:
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve, [await open_unix_listener(path)])
        yield path
        nursery.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    """Poll the listener's counters while real socket I/O completes."""
    with trio.fail_after(10):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.001)


async def raw_request(path: Path, data: bytes) -> bytes:
    """Everything the listener wrote before closing; a reset (closed with our request
    unread) counts as a close."""
    reply = bytearray()
    async with await trio.open_unix_socket(path) as stream:
        with contextlib.suppress(trio.BrokenResourceError):  # the send too: closed first
            await stream.send_all(data)
            while chunk := await stream.receive_some():
                reply += chunk
    return bytes(reply)


async def test_over_a_real_socket(short_tmp: Path) -> None:
    spool = FakeSpool()
    listener = make_listener(spool)
    async with serving(listener, short_tmp / "a.sock") as path:
        pong = await client.ping(path, target_instance_id=ME, sender_instance_id="42110-abcd")
        assert (pong.status, pong.state) == ("pong", "ready")
        me = f"{os.getpid()}-abcd"
        mine = enqueue_obj(sender_pid=os.getpid(), sender_instance_id=me, message_id=f"{me}-1")
        assert await raw_request(path, frame(mine)) == ack_frame(
            f"{me}-1", "accepted", queue_position=1
        )
        other = enqueue_obj(message_id=f"{SENDER}-2")
        assert await raw_request(path, frame(other)) == ack_frame(
            f"{SENDER}-2", "accepted", queue_position=2
        )
    assert [verified for _, verified in spool.items] == [True, False]


async def test_stalled_connection_does_not_block_others(short_tmp: Path) -> None:
    listener = make_listener(io_timeout=30.0)
    path = short_tmp / "a.sock"
    async with serving(listener, path), await trio.open_unix_socket(path) as stalled:
        await stalled.send_all(b"ZCODER-AGENT/1 50\n{")
        for _ in range(3):
            pong = await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
            assert pong.status == "pong"
        assert listener.statistics().active == 1


async def test_at_the_cap_the_oldest_stalled_connection_is_shed(short_tmp: Path) -> None:
    listener = make_listener(io_timeout=30.0, max_connections=2)
    async with serving(listener, short_tmp / "a.sock") as path:
        stalled = [await trio.open_unix_socket(path) for _ in range(2)]
        for stream in stalled:
            await stream.send_all(b"ZCODER-AGENT/1")
        await until(lambda: listener.statistics().active == 2)
        # a request that has fully arrived is answered, however many connections stall
        assert await raw_request(path, frame(ping_obj())) == ack_frame("p1", "pong", state="ready")
        # another stalled connection takes the place of the oldest one
        async with await trio.open_unix_socket(path) as third:
            await third.send_all(b"ZCODER-AGENT/1 ")
            with trio.fail_after(10):
                assert await stalled[0].receive_some() == b""
            stats = listener.statistics()
            assert (stats.shed, stats.refused) == (1, 0)
            # a request whose bytes come after the accept also sheds the oldest waiting one
            sock = wire.connect_nowait(path)
            assert sock is not None
            with sock:
                await until(lambda: listener.statistics().shed == 2)
                await wire.send_all(sock, frame(ping_obj()))
                with trio.fail_after(10):
                    assert (
                        await wire.receive_frame(sock, 4096)
                        == ack_frame("p1", "pong", state="ready").partition(b"\n")[2]
                    )
                    assert await stalled[1].receive_some() == b""
            assert listener.statistics().refused == 0
        for stream in stalled:
            await stream.aclose()


async def test_a_hundred_stalled_connections_never_lock_out_a_request(short_tmp: Path) -> None:
    spool = FakeSpool()
    listener = make_listener(spool, io_timeout=30.0)
    path = short_tmp / "a.sock"
    async with serving(listener, path), contextlib.AsyncExitStack() as stack:
        for _ in range(100):
            stream = await stack.enter_async_context(await trio.open_unix_socket(path))
            await stream.send_all(b"ZCODER-AGENT/1 50\n{")
        await until(lambda: listener.statistics().handled == 100)
        for n in range(3):
            pong = await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
            assert pong.status == "pong"
            ack = await client.send(path, enqueue_env(message_id=f"{SENDER}-m{n}"), io_timeout=30.0)
            assert ack.status == "accepted"
        stats = listener.statistics()
        assert stats.active <= 32 and stats.refused == 0 and len(spool.items) == 3


async def test_handle_connection_is_a_serve_listeners_handler(short_tmp: Path) -> None:
    # The shape of the app: trio.serve_listeners itself, Trio's own SocketStream per
    # connection, the cap and the fast path inside the handler.
    spool = FakeSpool()
    listener = make_listener(spool, io_timeout=30.0, max_connections=1)
    path = short_tmp / "a.sock"
    async with trio.open_nursery() as nursery:
        handler = listener.handle_connection
        await nursery.start(trio.serve_listeners, handler, [await open_unix_listener(path)])
        async with await trio.open_unix_socket(path) as stalled:
            await stalled.send_all(b"ZCODER-AGENT/1 50\n{")
            await until(lambda: listener.statistics().active == 1)
            pong = await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
            assert pong.status == "pong"  # answered at once: it took no place under the cap
            ack = await client.send(path, enqueue_env(), io_timeout=30.0)
            assert (ack.status, len(spool.items)) == ("accepted", 1)
            await until(lambda: listener.statistics().answered == 2)  # counted after the send
            stats = listener.statistics()
            assert (stats.shed, stats.refused, stats.active) == (0, 0, 1)
        nursery.cancel_scope.cancel()


async def test_a_failing_handler_does_not_end_the_server(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def broken_once(stream: trio.abc.Stream) -> PeerCred | None:
        calls.append(stream)
        if len(calls) == 1:
            raise RuntimeError("a bug in the handler")
        return peer_credentials(stream)

    monkeypatch.setattr("zcoder.relay.listener.peer_credentials", broken_once)
    listener = make_listener()
    async with serving(listener, short_tmp / "a.sock") as path:
        assert await raw_request(path, frame(ping_obj())) == b""  # closed, not a crash
        assert listener.statistics().errors == 1
        pong = await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
        assert pong.status == "pong"


async def test_another_uid_is_refused_unread(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    listener = make_listener()
    monkeypatch.undo()
    async with serving(listener, short_tmp / "a.sock") as path:
        assert await raw_request(path, frame(ping_obj())) == b""
    stats = listener.statistics()
    assert (stats.refused, stats.handled) == (1, 0)


async def test_many_clients_at_once(short_tmp: Path) -> None:
    spool = FakeSpool(max_queue=100)
    listener = make_listener(spool, max_connections=100)
    results: dict[int, Ack] = {}

    async def one(path: Path, i: int) -> None:
        results[i] = await client.send(
            path, enqueue_env(message_id=f"{SENDER}-m{i}"), io_timeout=5.0
        )

    async with serving(listener, short_tmp / "a.sock") as path, trio.open_nursery() as nursery:
        for i in range(40):
            nursery.start_soon(one, path, i)
    assert {ack.status for ack in results.values()} == {"accepted"}
    assert sorted(ack.queue_position or 0 for ack in results.values()) == list(range(1, 41))


async def test_requests_that_arrived_before_the_accept(short_tmp: Path) -> None:
    # Whatever is already in the socket when the listener accepts: a whole request is
    # answered at once, anything else goes the ordinary way with the same answers.
    spool = FakeSpool()
    listener = make_listener(spool)
    path = short_tmp / "a.sock"
    ping = frame(ping_obj())
    cases = [
        (ping, ack_frame("p1", "pong", state="ready")),
        (frame(enqueue_obj()), ack_frame(MID, "accepted", queue_position=1)),
        (ping + b"x", ack_frame("", "invalid")),  # bytes after the frame
        (b"ZCODER-AGENT/1 07\n", ack_frame("", "invalid")),  # a bad length
        (b"GET / HTTP/1.0\r\n\r\n", b""),  # not our protocol: closed unanswered
    ]
    async with serving(listener, path):
        for data, expected in cases:
            sock = wire.connect_nowait(path)  # no checkpoint until the request is in
            assert sock is not None
            await wire.send_all(sock, data)
            sock.shutdown(socket.SHUT_WR)
            with sock:
                reply = bytearray()
                with trio.fail_after(5):
                    while chunk := await trio_recv(sock):
                        reply += chunk
            assert bytes(reply) == expected, data
        split = wire.connect_nowait(path)  # half of it before the accept, half after
        assert split is not None
        with split:
            await wire.send_all(split, ping[:10])
            await trio.testing.wait_all_tasks_blocked()
            await wire.send_all(split, ping[10:])
            reply = bytearray()
            with trio.fail_after(5):
                while chunk := await trio_recv(split):
                    reply += chunk
            assert bytes(reply) == ack_frame("p1", "pong", state="ready")
    assert len(spool.items) == 1
    stats = listener.statistics()
    assert (stats.handled, stats.answered, stats.dropped) == (6, 5, 1)


async def trio_recv(sock: socket.socket) -> bytes:
    while True:
        try:
            return sock.recv(4096)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(sock)
        except ConnectionResetError:
            return b""


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_every_descriptor_is_closed_on_every_path(short_tmp: Path) -> None:
    # Success, refusal, bad frame, garbage, a stalled peer timed out, a peer that hangs up
    # mid-frame, a client that cannot connect, and shutdown: afterwards the process holds
    # exactly the descriptors it held before.
    gc.collect()  # earlier tests' garbage must not close descriptors meanwhile
    before = open_fds()
    listener = make_listener(FakeSpool(), io_timeout=0.2)
    path = short_tmp / "a.sock"
    async with serving(listener, path):
        assert (await client.ping(path, target_instance_id=ME, sender_instance_id=ME)).status
        assert (await client.send(path, enqueue_env(), io_timeout=5)).status == "accepted"
        assert await raw_request(path, b"ZCODER-AGENT/1 x\n") == ack_frame("", "invalid")
        assert await raw_request(path, b"GET / HTTP/1.0\r\n\r\n") == b""
        async with await trio.open_unix_socket(path) as stalled:
            await stalled.send_all(b"ZCODER-AGENT/1 50\n{")
            assert await stalled.receive_some() == b""  # dropped after io_timeout
        async with await trio.open_unix_socket(path) as gone:
            await gone.send_all(b"ZCODER-AGENT/1 50\n{")
        with pytest.raises(RelayTransportError, match="cannot connect"):
            await client.send(short_tmp / "missing.sock", enqueue_env(), io_timeout=5)
        await until(lambda: listener.statistics().active == 0)
        assert listener.statistics().handled == 6
    # serve() closed the listening socket and its duplicate when serving() cancelled it
    assert open_fds() - before == set()


async def test_serve_closes_its_listeners_when_it_ends(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    trio_listener = await open_unix_listener(path)
    listener = make_listener()
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve, [trio_listener])
        assert (await client.ping(path, target_instance_id=ME, sender_instance_id=ME)).status
        nursery.cancel_scope.cancel()
    assert trio_listener.socket.fileno() == -1
    with pytest.raises(RelayTransportError, match="Connection refused"):
        await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
    await trio_listener.aclose()  # the owner's own close stays harmless


async def test_open_unix_listener(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    listener = await open_unix_listener(path)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with pytest.raises(RelayUnavailable, match="cannot listen on"):
            await open_unix_listener(path)
    finally:
        await listener.aclose()
    with pytest.raises(RelayUnavailable):
        await open_unix_listener(short_tmp / ("x" * 120))
    assert not (short_tmp / ("x" * 120)).exists()


async def test_limits_respected_in_ack(short_tmp: Path) -> None:
    listener = make_listener(limits=Limits(max_bytes=1024, max_message_chars=10))
    assert await exchange(listener, frame(enqueue_obj(body="é" * 11))) == ack_frame(MID, "invalid")


# -- two OS processes ----------------------------------------------------------------------

LISTENER_SCRIPT = """
import sys, trio
from pathlib import Path
from zcoder.relay.envelope import Limits
from zcoder.relay.listener import Listener, open_unix_listener

class PrintingSpool:
    paused = False
    def __init__(self):
        self.ids = []
    def enqueue(self, envelope, *, verified):
        if envelope.message_id in self.ids:
            return "duplicate", None
        self.ids.append(envelope.message_id)
        print("stored", envelope.message_id, verified, repr(envelope.body), flush=True)
        return "accepted", len(self.ids)

async def main(path, instance_id):
    listener = Listener(instance_id=instance_id, spool=PrintingSpool(),
                        sender_check=lambda env: True, state=lambda: "busy",
                        limits=Limits(), io_timeout=2.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve, [await open_unix_listener(Path(path))])
        print("ready", flush=True)

trio.run(main, sys.argv[1], sys.argv[2])
"""


async def read_line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        chunk = await stream.receive_some()
        assert chunk, f"the listener process exited; output so far {bytes(buffer)!r}"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


async def test_ping_and_enqueue_between_two_processes(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", LISTENER_SCRIPT, str(path), ME], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    buffer = bytearray()
    try:
        with trio.fail_after(30):
            assert await read_line(proc.stdout, buffer) == b"ready"
            pong = await client.ping(path, target_instance_id=ME, sender_instance_id="7-abcd")
            assert (pong.status, pong.state) == ("pong", "busy")
            me = f"{os.getpid()}-test"
            body = 'tabs\tquotes " backslash \\ glob *?[] emoji 😀\nline two'
            env = enqueue_env(
                sender_pid=os.getpid(), sender_instance_id=me, message_id=f"{me}-1", body=body
            )
            first = await client.send(path, env, io_timeout=5)
            assert (first.status, first.queue_position) == ("accepted", 1)
            assert (await client.send(path, env, io_timeout=5)).status == "duplicate"
            line = await read_line(proc.stdout, buffer)
            assert line.decode() == f"stored {me}-1 True {body!r}"
    finally:
        proc.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await proc.wait()
    assert proc.returncode is not None


class _Spawns(trio.abc.Instrument):
    def __init__(self) -> None:
        self.spawned = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1


async def _written_before_the_accept(path: Path, data: bytes) -> bytes:
    """Connect and write ``data`` before the listener can run (plain non-blocking socket,
    no checkpoint in between), then read to the end: the request is whole when the
    listener accepts it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        sock.connect(os.fspath(path))
        sock.send(data)
        reply = bytearray()
        while True:
            await trio.lowlevel.wait_readable(sock)
            chunk = sock.recv(4096)
            if not chunk:
                return bytes(reply)
            reply += chunk


async def test_a_whole_request_is_answered_by_the_accepting_task(short_tmp: Path) -> None:
    # No task of its own: the ack is written in the pass that accepted the connection.
    spool = FakeSpool()
    listener = make_listener(spool, io_timeout=30.0)
    spawns = _Spawns()
    async with serving(listener, short_tmp / "a.sock") as path:
        trio.lowlevel.add_instrument(spawns)
        try:
            pong = await _written_before_the_accept(path, frame(ping_obj()))
            enqueue = enqueue_obj(message_id=f"{SENDER}-1")
            ack = await _written_before_the_accept(path, frame(enqueue))
        finally:
            trio.lowlevel.remove_instrument(spawns)
    assert pong.startswith(b"ZCODER-AGENT/1 ") and b'"status":"pong"' in pong
    assert ack == ack_frame(f"{SENDER}-1", "accepted", queue_position=1)
    assert spawns.spawned == 0
    stats = listener.statistics()
    assert (stats.handled, stats.answered, stats.dropped, stats.active) == (2, 2, 0, 0)


async def test_a_request_still_arriving_gets_a_task_and_the_same_answer(short_tmp: Path) -> None:
    listener = make_listener(io_timeout=30.0)
    spawns = _Spawns()
    data = frame(ping_obj())
    async with serving(listener, short_tmp / "a.sock") as path:
        trio.lowlevel.add_instrument(spawns)
        try:
            async with await trio.open_unix_socket(path) as stream:
                await stream.send_all(data[:5])
                await until(lambda: listener.statistics().active == 1)
                await stream.send_all(data[5:])
                reply = bytearray()
                while chunk := await stream.receive_some():
                    reply += chunk
        finally:
            trio.lowlevel.remove_instrument(spawns)
    assert b'"status":"pong"' in reply
    assert spawns.spawned == 1
    stats = listener.statistics()
    assert (stats.handled, stats.answered, stats.active) == (1, 1, 0)


async def test_accept_rides_out_running_out_of_descriptors(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As trio.serve_listeners: EMFILE is logged and accept tried again, not an end.
    listener = make_listener()
    real_accept = trio.SocketListener.accept
    failures = [OSError(errno.EMFILE, "Too many open files")]

    async def accept(self: trio.SocketListener) -> trio.SocketStream:
        if failures:
            raise failures.pop()
        return await real_accept(self)

    monkeypatch.setattr(trio.SocketListener, "accept", accept)
    async with serving(listener, short_tmp / "a.sock") as path:
        pong = await client.ping(path, target_instance_id=ME, sender_instance_id=ME)
    assert pong.status == "pong" and failures == []


async def _read_to_end(sock: socket.socket) -> bytes:
    reply = bytearray()
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            return bytes(reply)
        if not chunk:
            return bytes(reply)
        reply += chunk


async def test_a_request_read_and_stored_as_it_is_shed_still_gets_its_ack(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rest of A's frame arrives and wakes its read; in the same pass a newer connection
    # at the cap sheds A. A's task still reads, decides and stores the message: its ack must
    # go out (written at once, before any checkpoint), or the sender, retrying, would be
    # told "duplicate" of a message it was never told was accepted.
    spool = FakeSpool()
    listener = make_listener(spool, io_timeout=30.0, max_connections=1)
    real_receive = trio.SocketStream.receive_some
    parked: list[trio.lowlevel.Task] = []

    async def receive_some(self: trio.SocketStream, max_bytes: int | None = None) -> bytes:
        if parked:
            return await real_receive(self, max_bytes)
        parked.append(trio.lowlevel.current_task())
        # Woken by the I/O manager: a cancel arriving now is not delivered here.
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        return os.read(self.socket.fileno(), max_bytes or 65536)

    monkeypatch.setattr(trio.SocketStream, "receive_some", receive_some)
    data = frame(enqueue_obj())
    async with serving(listener, short_tmp / "a.sock") as path:
        a = wire.connect_nowait(path)
        assert a is not None
        with a:
            await wire.send_all(a, data[:20])
            await until(lambda: bool(parked) and listener.statistics().active == 1)
            await wire.send_all(a, data[20:])
            b = wire.connect_nowait(path)
            assert b is not None
            with b:
                await wire.send_all(b, b"ZCODER-AGENT/1")
                try:
                    await until(lambda: listener.statistics().shed == 1)
                finally:
                    trio.lowlevel.reschedule(parked[0])
                with trio.fail_after(10):
                    reply = await _read_to_end(a)
    assert len(spool.items) == 1
    assert reply == ack_frame(MID, "accepted", queue_position=1)
