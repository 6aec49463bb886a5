"""Plain non-blocking socket I/O under Trio: connect, frames; what has arrived on a stream."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio
import trio.testing

from zcoder.errors import FrameError
from zcoder.relay import wire


def test_connect_nowait_tells_a_full_backlog_from_a_dead_socket(short_tmp: Path) -> None:
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(os.fspath(short_tmp / "dead.sock"))
    with pytest.raises(ConnectionRefusedError):
        wire.connect_nowait(short_tmp / "dead.sock")
    with pytest.raises(FileNotFoundError):
        wire.connect_nowait(short_tmp / "missing.sock")
    with socket.socket(socket.AF_UNIX) as full:
        full.bind(os.fspath(short_tmp / "full.sock"))
        full.listen(0)
        pending = []
        try:
            while (sock := wire.connect_nowait(short_tmp / "full.sock")) is not None:
                pending.append(sock)
                assert len(pending) < 100
            assert pending  # the backlog took some, then the listener was busy, not dead
            assert all(not s.getblocking() for s in pending)
        finally:
            for sock in pending:
                sock.close()


async def test_connect_waits_while_the_backlog_is_full(short_tmp: Path) -> None:
    with socket.socket(socket.AF_UNIX) as full:
        full.bind(os.fspath(short_tmp / "full.sock"))
        full.listen(0)
        pending = []
        while (sock := wire.connect_nowait(short_tmp / "full.sock")) is not None:
            pending.append(sock)
        try:
            async with trio.open_nursery() as nursery:

                async def drain_one() -> None:
                    await trio.sleep(0.05)
                    full.accept()[0].close()

                nursery.start_soon(drain_one)
                with trio.fail_after(5):
                    late = await wire.connect(short_tmp / "full.sock")
            late.close()
        finally:
            for sock in pending:
                sock.close()


async def test_frames_over_a_socket_pair() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        b.setblocking(False)
        await wire.send_all(a, b"ZCODER-AGENT/1 2\n{}")
        assert await wire.receive_frame(b, 100) == b"{}"
        big = b"x" * 300_000  # more than a socket buffer: the writer must wait
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wire.send_all, a, b"ZCODER-AGENT/1 300000\n" + big)
            assert await wire.receive_frame(b, 300_000) == big
        await wire.send_all(a, b"ZCODER-AGENT/1 5\n{")
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            await wire.receive_frame(b, 100)
        await wire.send_all(b, b"HTTP/1.0 200 OK\r\n")
        with pytest.raises(FrameError):
            await wire.receive_frame(a, 100)


async def test_bytes_ready_tells_what_has_arrived() -> None:
    a, b = trio.socket.socketpair(socket.AF_UNIX)
    ours, theirs = trio.SocketStream(a), trio.SocketStream(b)
    async with ours, theirs:
        assert wire.bytes_ready(theirs) == 0
        await ours.send_all(b"ZCODER-AGENT/1 2\n{}")
        assert wire.bytes_ready(theirs) == 19
        assert await theirs.receive_some(5) == b"ZCODE"
        assert wire.bytes_ready(theirs) == 14
        await ours.send_eof()
        assert wire.bytes_ready(theirs) == 14  # end of stream adds nothing to read
    assert wire.bytes_ready(theirs) == 0  # closed
    assert wire.bytes_ready(trio.testing.memory_stream_pair()[0]) == 0  # not a socket


async def test_a_cancelled_listen_leaks_no_descriptor_and_no_socket_file(short_tmp: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    path = short_tmp / "a.sock"
    with trio.CancelScope() as scope:
        scope.cancel()
        await wire.open_unix_listener(path)
    assert scope.cancelled_caught
    assert not path.exists()
    assert len(os.listdir("/proc/self/fd")) == fds_before
