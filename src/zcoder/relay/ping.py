"""A ping's steps that need no event loop: connect without waiting, write the request at
once, judge the answer.

Shared by the Trio client (``client.ping``, ``client.finish_ping``: discovery inside the
app) and the blocking discovery of ``zcoder agents`` (``blocking.py``), so that both make
the same request and accept the same answers. This module imports no trio.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
from pathlib import Path

import attrs

from zcoder.errors import FrameError, RelayTransportError
from zcoder.relay.envelope import Ack, Ping, decode_ack, encode_envelope
from zcoder.relay.limits import DEFAULT_MAX_BYTES
from zcoder.relay.protocol import INSTANCE_ID_RE, MESSAGE_ID_RE, encode_frame

__all__ = [
    "PendingPing",
    "broke",
    "checked_ack",
    "closed_early",
    "connect_nowait",
    "malformed",
    "ping_request",
    "pong",
    "start",
    "start_ping",
]

# A listener's full backlog refuses with EAGAIN instead of queueing the connect (Linux).
_BACKLOG_FULL = (errno.EAGAIN, errno.EINPROGRESS)


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


def ping_request(target_instance_id: str, sender_instance_id: str) -> Ping:
    """Our pings keep the strict form (a receiver accepts any printable ids in a ping, but
    an older zcoder needs instance ids and a message id)."""
    message_id = f"{sender_instance_id}-ping-{secrets.token_hex(4)}"
    for name, value, grammar in (
        ("target_instance_id", target_instance_id, INSTANCE_ID_RE),
        ("sender_instance_id", sender_instance_id, INSTANCE_ID_RE),
        ("message_id", message_id, MESSAGE_ID_RE),
    ):
        if not grammar.fullmatch(value):
            raise RelayTransportError(f"cannot ping: {name} {value[:120]!r} is malformed")
    return Ping(1, "ping", message_id, target_instance_id, sender_instance_id)


@attrs.define
class PendingPing:
    """A ping written, as far as the socket took it at once, on a connected socket."""

    sock: socket.socket
    request: Ping
    unsent: bytes


def start_ping(
    sock: socket.socket,
    *,
    target_instance_id: str,
    sender_instance_id: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> PendingPing:
    """Write a ping on a connected non-blocking socket without waiting. Written right after
    the connect, the request is there before the peer accepts, so the peer reads it at once
    and is woken only once. ``RelayTransportError`` (the socket closed) for a bad id or a
    broken connection."""
    try:
        request = ping_request(target_instance_id, sender_instance_id)
    except BaseException:
        sock.close()
        raise
    return start(sock, request, max_bytes)


def start(sock: socket.socket, request: Ping, max_bytes: int) -> PendingPing:
    """``start_ping`` with a request made already (the socket is closed on an error)."""
    try:
        frame = encode_frame(encode_envelope(request), max_bytes=max_bytes)
        try:
            sent = sock.send(frame)
        except BlockingIOError:
            sent = 0
    except OSError as exc:
        sock.close()
        target = request.target_instance_id
        raise RelayTransportError(f"ping to {target} failed: {exc}") from None
    except BaseException:
        sock.close()
        raise
    return PendingPing(sock, request, frame[sent:])


def checked_ack(payload: bytes, message_id: str) -> Ack:
    """The ack in ``payload``, which must answer ``message_id`` (or no id at all)."""
    ack = decode_ack(payload)
    if ack.message_id not in (message_id, ""):
        raise RelayTransportError(f"the ack is for message {ack.message_id!r}, not ours")
    return ack


def pong(pending: PendingPing, payload: bytes) -> Ack:
    """The answer to ``pending``'s ping; ``RelayTransportError`` unless it is its pong."""
    ack = checked_ack(payload, pending.request.message_id)
    if ack.status != "pong":
        target = pending.request.target_instance_id
        raise RelayTransportError(f"ping to {target} was answered {ack.status}")
    return ack


# Why a connection failed, in the same words whichever side drives the socket.


def broke(exc: OSError) -> str:
    return f"the connection broke: {exc.strerror or exc}"


def closed_early() -> str:
    return "the connection closed before a complete ack"


def malformed(exc: FrameError) -> RelayTransportError:
    return RelayTransportError(f"the peer answered with a malformed frame: {exc}")
