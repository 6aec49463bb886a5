"""The sending side: one connection per request, one frame each way.

The caller bounds the whole call with ``trio.fail_after``; ``send`` also bounds connect,
write and acknowledgement read by ``io_timeout`` each. Every failure is a
``RelayTransportError`` whose message says what happened.

Retry rule (``send`` only): a failure after the connection was made (write error, reset,
timeout, end of stream before a complete ack) is ambiguous: the receiver may have stored
the message. ``send`` then retries exactly once with the same envelope, so the same message
id; the receiver answers ``duplicate`` if the first attempt got through. A failure to
connect (missing socket, refused, permission) is not ambiguous, nothing was sent, and is
reported at once. A malformed ack is reported at once too: the peer is not speaking the
protocol, and asking again would not help.
"""

from __future__ import annotations

import socket
from pathlib import Path

import trio

from zcoder.errors import FrameError, RelayTransportError
from zcoder.relay import wire
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt, encode_envelope
from zcoder.relay.limits import DEFAULT_MAX_BYTES
from zcoder.relay.ping import (
    PendingPing,
    broke,
    checked_ack,
    closed_early,
    malformed,
    ping_request,
    pong,
    start,
    start_ping,
)
from zcoder.relay.protocol import INSTANCE_ID_RE, MESSAGE_ID_RE, encode_frame

__all__ = [
    "PendingPing",
    "finish_ping",
    "new_message_id",
    "ping",
    "request",
    "send",
    "start_ping",
]


class _Ambiguous(Exception):
    """The request may or may not have been received."""


def message_counter(message_id: str) -> int:
    """The counter that ends a message id (``new_message_id``); 0 when it ends otherwise."""
    tail = message_id.rpartition("-")[2]
    return int(tail) if tail.isascii() and tail.isdigit() else 0


def new_message_id(instance_id: str, counter: int) -> str:
    """``<instance_id>-<counter>``: unique per sender as long as the counter never repeats."""
    if not INSTANCE_ID_RE.fullmatch(instance_id) or type(counter) is not int or counter < 0:
        raise ValueError(f"cannot make a message id from {instance_id!r} and {counter!r}")
    message_id = f"{instance_id}-{counter}"
    if not MESSAGE_ID_RE.fullmatch(message_id):
        raise ValueError(f"message id {message_id!r} is too long")
    return message_id


async def _connect(socket_path: Path) -> socket.socket:
    try:
        return await wire.connect(socket_path)
    except OSError as exc:
        raise RelayTransportError(
            f"cannot connect to {socket_path}: {exc.strerror or exc}"
        ) from None


async def _exchange(sock: socket.socket, frame: bytes, max_bytes: int, io_timeout: float) -> bytes:
    """Write the request, then read the ack, each within ``io_timeout``."""
    written = False
    with trio.move_on_after(io_timeout) as deadline:
        await _write(sock, frame)
        written = True
        deadline.deadline = trio.current_time() + io_timeout
        return await _read_ack(sock, max_bytes)
    if written:
        raise _Ambiguous("no ack within the deadline")
    raise _Ambiguous("the request could not be written within the deadline")


async def _write(sock: socket.socket, frame: bytes) -> None:
    try:
        await wire.send_all(sock, frame)
    except OSError as exc:
        raise _Ambiguous(broke(exc)) from None


async def _read_ack(sock: socket.socket, max_bytes: int) -> bytes:
    try:
        return await wire.receive_frame(sock, max_bytes)
    except EOFError:
        raise _Ambiguous(closed_early()) from None
    except OSError as exc:
        raise _Ambiguous(broke(exc)) from None
    except FrameError as exc:
        raise malformed(exc) from None


async def _attempt(
    socket_path: Path, frame: bytes, message_id: str, io_timeout: float, max_bytes: int
) -> Ack:
    with trio.move_on_after(io_timeout) as connecting:
        sock = await _connect(socket_path)
    if connecting.cancelled_caught:
        raise RelayTransportError(f"connecting to {socket_path} timed out")
    with sock:
        payload = await _exchange(sock, frame, max_bytes, io_timeout)
    return checked_ack(payload, message_id)


async def send(
    socket_path: Path, envelope: Enqueue, *, io_timeout: float, max_bytes: int = DEFAULT_MAX_BYTES
) -> Ack:
    """Deliver ``envelope``; return the receiver's ack with its exact status."""
    return await _deliver(socket_path, envelope, io_timeout=io_timeout, max_bytes=max_bytes)


async def request(
    socket_path: Path,
    envelope: Receipt | Cancel,
    *,
    io_timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Ack:
    """Deliver a ``receipt`` or a ``cancel`` (zcoder's extension) with the same retry rule
    as ``send``: both are idempotent at the receiver (a receipt sets a state, a cancel of
    a message already withdrawn is answered ``withdrawn`` again). A version-1 peer answers
    ``unsupported``."""
    return await _deliver(socket_path, envelope, io_timeout=io_timeout, max_bytes=max_bytes)


async def _deliver(
    socket_path: Path,
    envelope: Enqueue | Receipt | Cancel,
    *,
    io_timeout: float,
    max_bytes: int,
) -> Ack:
    try:
        frame = encode_frame(encode_envelope(envelope), max_bytes=max_bytes)
    except FrameError as exc:
        raise RelayTransportError(f"the message is too large to send: {exc}") from None
    args = (socket_path, frame, envelope.message_id, io_timeout, max_bytes)
    try:
        ack = await _attempt(*args)
    except _Ambiguous:
        try:
            ack = await _attempt(*args)
        except _Ambiguous as exc:
            raise RelayTransportError(f"no ack from {socket_path} after one retry: {exc}") from None
    if ack.status == "pong":
        raise RelayTransportError(f"the peer answered an {envelope.type} with pong")
    return ack


async def finish_ping(pending: PendingPing, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Ack:
    """Write the rest of the ping and read its ``pong``; the socket is closed on return.
    ``RelayTransportError`` for any other answer or none; the caller bounds the wait."""
    target = pending.request.target_instance_id
    with pending.sock:
        try:  # no deadline of its own: the caller bounds the whole ping
            await _write(pending.sock, pending.unsent)
            payload = await _read_ack(pending.sock, max_bytes)
        except _Ambiguous as exc:
            raise RelayTransportError(f"ping to {target} failed: {exc}") from None
    return pong(pending, payload)


async def ping(
    socket_path: Path,
    *,
    target_instance_id: str,
    sender_instance_id: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Ack:
    """Probe a peer; return its ``pong`` ack (with its ``state``), else raise
    ``RelayTransportError`` (unreachable, stalled, wrong instance, any other answer)."""
    request = ping_request(target_instance_id, sender_instance_id)  # bad ids: no connect
    pending = start(await _connect(socket_path), request, max_bytes)
    return await finish_ping(pending, max_bytes=max_bytes)
