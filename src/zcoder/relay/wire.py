"""Unix socket I/O for the relay: the client's plain non-blocking sockets, and what the
listener needs around Trio's own streams.

The client (``client.py``): a relay connection is a connect, one small write and one small
read each way. A ``trio.SocketStream`` adds a pass through the scheduler to every step (it
yields even when the system call succeeded at once); here a step that can complete at once
does, and a step that would block waits with ``trio.lowlevel.wait_readable`` /
``wait_writable``, so cancellation and deadlines work as usual. ``connect``,
``send_all`` and ``receive_frame`` raise ``OSError`` (connection), ``FrameError`` (a
malformed frame) and ``EOFError`` (end of stream before the frame was complete); the caller
owns the socket.

The listener (``listener.py``) accepts ``trio.SocketStream`` connections as
``trio.serve_listeners`` does: ``open_unix_listener`` binds and listens,
``peer_credentials`` reads ``SO_PEERCRED`` and ``bytes_ready`` tells how much of a request
has already arrived. ``receive_now`` and ``send_now`` read what has arrived and write what
the socket takes at once without a pass through the scheduler: in the interactive app
every pass is a turn of the asyncio loop that hosts Trio, which may come after a redraw,
so a request that has arrived whole is answered in the pass that accepted it (the stream's
own calls remain for what would have to wait, under the caller's deadline).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import termios
from pathlib import Path

import attrs
import trio

from zcoder.errors import RelayUnavailable
from zcoder.relay.ping import connect_nowait
from zcoder.relay.protocol import FrameDecoder

__all__ = [
    "PeerCred",
    "bytes_ready",
    "connect",
    "connect_nowait",
    "open_unix_listener",
    "peer_credentials",
    "receive_frame",
    "receive_now",
    "send_all",
    "send_now",
]

_BACKLOG_RETRY = 0.002
_PEERCRED = struct.Struct("3i")
_INT = struct.Struct("i")
_FIONREAD: int | None = getattr(termios, "FIONREAD", None)


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


def bytes_ready(stream: trio.abc.Stream) -> int:
    """How many bytes a ``trio.SocketStream`` can receive now without waiting (``FIONREAD``);
    0 for any other stream, or where the system does not tell (the caller then waits)."""
    if _FIONREAD is None or not isinstance(stream, trio.SocketStream):
        return 0
    try:
        raw = fcntl.ioctl(stream.socket.fileno(), _FIONREAD, bytes(_INT.size))
    except (OSError, ValueError):  # closed (fileno -1) or not supported
        return 0
    (count,) = _INT.unpack(raw)
    return max(0, int(count))


def _fd(stream: trio.abc.Stream) -> int | None:
    if not isinstance(stream, trio.SocketStream):
        return None
    fd = stream.socket.fileno()
    return fd if fd >= 0 else None


def receive_now(stream: trio.abc.Stream, max_bytes: int) -> bytes | None:
    """Up to ``max_bytes`` already arrived on a ``trio.SocketStream``, read at once (an
    empty ``bytes`` at end of stream); ``None`` when nothing can be read without waiting
    or it is another kind of stream (the caller then awaits ``receive_some``).
    ``trio.BrokenResourceError`` when the connection failed."""
    fd = _fd(stream)
    if fd is None:
        return None
    try:
        return os.read(fd, max_bytes)
    except BlockingIOError:
        return None
    except OSError as exc:
        raise trio.BrokenResourceError(str(exc)) from exc


def send_now(stream: trio.abc.Stream, data: bytes) -> int:
    """Write what a ``trio.SocketStream``'s socket takes at once of ``data``; how many
    bytes (0 for another kind of stream: the caller sends the rest with ``send_all``).
    ``trio.BrokenResourceError`` when the peer has gone."""
    fd = _fd(stream)
    if fd is None:
        return 0
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise trio.BrokenResourceError(str(exc)) from exc
