"""Unix socket I/O on plain non-blocking sockets, driven by Trio's readiness waits.

A relay connection is a connect, one small write and one small read each way: a
``trio.SocketStream`` adds a pass through the scheduler to every step (it yields even when
the system call succeeded at once), which is most of a local round trip's cost. Here a
step that can complete at once does, and a step that would block waits with
``trio.lowlevel.wait_readable`` / ``wait_writable``, so cancellation and deadlines work as
usual. The functions raise ``OSError`` (connection), ``FrameError`` (a malformed frame) and
``EOFError`` (end of stream before the frame was complete); the caller owns the socket.

For the listener: ``open_unix_listener`` binds and listens, ``duplicate_socket`` gives a
plain socket to accept on, ``peer_credentials`` reads ``SO_PEERCRED``,
``peek_whole_frame`` takes a request only if it has fully arrived, and
``SocketConnection`` wraps an accepted socket as a ``trio.abc.Stream``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from pathlib import Path

import attrs
import trio

from zcoder.errors import FrameError, RelayUnavailable
from zcoder.relay.protocol import FrameDecoder

__all__ = [
    "PeerCred",
    "SocketConnection",
    "connect",
    "connect_nowait",
    "duplicate_socket",
    "open_unix_listener",
    "peek_whole_frame",
    "peer_credentials",
    "receive_frame",
    "send_all",
]

# A listener's full backlog refuses with EAGAIN instead of queueing the connect (Linux).
_BACKLOG_FULL = (errno.EAGAIN, errno.EINPROGRESS)
_BACKLOG_RETRY = 0.002
_PEERCRED = struct.Struct("3i")


def connect_nowait(path: str | Path) -> socket.socket | None:
    """A connected non-blocking socket, or ``None`` when the listener's backlog is full.
    ``OSError`` when nobody listens (``ECONNREFUSED``), the path is missing or too long."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.connect(os.fspath(path))
    except OSError as exc:
        sock.close()
        if exc.errno in _BACKLOG_FULL:
            return None
        raise
    return sock


async def connect(path: str | Path) -> socket.socket:
    """``connect_nowait``, trying again while the listener's backlog is full (bounded by
    the caller's deadline; a backlog drains in microseconds)."""
    while True:
        sock = connect_nowait(path)
        if sock is not None:
            return sock
        await trio.sleep(_BACKLOG_RETRY)


async def send_all(sock: socket.socket, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)


async def receive_frame(sock: socket.socket, max_bytes: int) -> bytes:
    """The payload of the one frame the peer sends."""
    decoder = FrameDecoder(max_bytes=max_bytes)
    while True:
        try:
            chunk = sock.recv(decoder.wanted())
        except BlockingIOError:
            await trio.lowlevel.wait_readable(sock)
            continue
        if not chunk:
            raise EOFError("the connection closed before a complete frame")
        payload = decoder.feed(chunk)
        if payload is not None:
            return payload


class SocketConnection(trio.abc.Stream):
    """A connected non-blocking socket as a ``trio.abc.Stream`` whose calls return without
    yielding when the system call completes at once. Connection errors become
    ``trio.BrokenResourceError``, as with ``trio.SocketStream``. One task at a time."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.socket = sock

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await send_all(self.socket, data)
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.wait_writable(self.socket)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while True:
            try:
                return self.socket.recv(max_bytes or 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.socket)
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc

    async def aclose(self) -> None:
        self.socket.close()


@attrs.frozen
class PeerCred:
    """The connecting process, as the kernel reports it."""

    pid: int
    uid: int
    gid: int


def peer_credentials(stream: trio.abc.Stream) -> PeerCred | None:
    """``SO_PEERCRED`` of a Unix socket stream; ``None`` where it is unavailable."""
    option = getattr(socket, "SO_PEERCRED", None)
    sock = getattr(stream, "socket", None)
    if option is None or sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, _PEERCRED.size)
    except OSError:
        return None
    pid, uid, gid = _PEERCRED.unpack(raw)
    return PeerCred(pid=pid, uid=uid, gid=gid)


async def open_unix_listener(path: Path) -> trio.SocketListener:
    """Bind ``path`` (which must not exist), listen with backlog 64, chmod 0600;
    ``RelayUnavailable`` if any step fails (a socket file this call created is removed)."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound = False
    try:
        await sock.bind(os.fspath(path))
        bound = True
        os.chmod(path, 0o600)
        sock.listen(64)
    except BaseException as exc:  # also a cancel during bind: never leak the descriptor
        sock.close()
        if bound:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if isinstance(exc, OSError):
            raise RelayUnavailable(f"cannot listen on {path}: {exc.strerror or exc}") from None
        raise
    return trio.SocketListener(sock)


def peek_whole_frame(sock: socket.socket, max_bytes: int) -> bytes | None:
    """Read the request if it has fully arrived and is well framed; else read nothing."""
    decoder = FrameDecoder(max_bytes=max_bytes)
    try:
        data = sock.recv(decoder.wanted(), socket.MSG_PEEK)
        payload = decoder.feed(data)
    except (OSError, FrameError):
        return None
    if payload is None:
        return None
    try:
        taken = sock.recv(len(data))
    except OSError:
        return None
    return payload if taken == data else None


def duplicate_socket(sock: trio.socket.SocketType) -> socket.socket:
    """A plain socket on a duplicate of ``sock``'s descriptor (closing one leaves the other)."""
    fd = os.dup(sock.fileno())
    try:
        return socket.socket(fileno=fd)
    except BaseException:
        os.close(fd)
        raise
