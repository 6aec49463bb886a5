"""The receiving side: a Trio task serving the instance's Unix socket.

Per connection, and nothing else: read one frame under ``io_timeout`` (header and payload
together), validate it, run the sender check, store it through the spool, write one ack
under ``io_timeout``, close. It never touches the agent, the session or the UI.

A request that has fully arrived by the time the connection is accepted (the usual case:
clients write right after connecting) is answered there and then, with no task and no
wait; any other connection gets a task of its own that reads under the deadline. Both give
the same answers.

What a peer gets:

* another uid (Linux ``SO_PEERCRED``): closed before anything is read;
* a request that has fully arrived by the time it is accepted: always answered, whatever
  the number of other connections;
* any other connection while ``max_connections`` connections are still waiting for their
  frame: the oldest of those waiting ones is shed (closed without an answer) to make room,
  so stalled peers can delay each other but never lock out a request that arrives;
* a header that does not start with ``ZCODER-AGENT/1`` and a space: closed without an
  answer (the peer does not speak this protocol);
* our magic but a bad length (non-decimal, leading zero, above ``max_bytes``) or bytes
  after the payload: an ``invalid`` ack with ``message_id`` ``""``;
* end of stream or no complete frame within ``io_timeout``: closed without an answer;
* a complete frame: exactly one ack, decided in the spec's order (see ``envelope.py``),
  then the sender check (``invalid`` if it fails), then the spool (``duplicate``,
  ``paused``, ``full`` or ``accepted`` with ``queue_position``; a message the file system
  refuses to store is ``full`` too); a ping gets ``pong`` with the instance's ``state``;
* an unexpected failure inside the spool or the sender check: closed without an answer
  (ambiguous for the sender, who retries once with the same id).

The handler catches its own errors (an exception escaping a ``serve_listeners`` handler
would end the app); ``trio.Cancelled`` propagates. ``verified`` passed to the spool is true
when the connecting process's pid (``SO_PEERCRED``) equals ``sender_pid``.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from zcoder.errors import FrameError
from zcoder.relay import wire
from zcoder.relay.envelope import (
    Ack,
    Enqueue,
    Limits,
    Ping,
    Rejected,
    decode_request,
    encode_envelope,
)
from zcoder.relay.protocol import FrameDecoder, encode_frame
from zcoder.relay.wire import PeerCred, SocketConnection, open_unix_listener, peer_credentials

__all__ = [
    "Listener",
    "ListenerStatistics",
    "PeerCred",
    "SpoolLike",
    "open_unix_listener",
    "peer_credentials",
]

_log = logging.getLogger(__name__)
_CLOSE_GRACE = 1.0
# accept() failures that mean "too many descriptors or too little memory right now", as in
# trio.serve_listeners: wait a little and go on accepting.
_ACCEPT_PRESSURE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_ACCEPT_BACKOFF = 0.1
_ACCEPT_BATCH = 16


class SpoolLike(Protocol):
    """What the listener needs from the spool (``relay/spool.py``)."""

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]: ...

    @property
    def paused(self) -> bool: ...


@attrs.define
class ListenerStatistics:
    """Counters for tests and diagnostics."""

    active: int = 0  # connections inside handle() now
    handled: int = 0  # connections given to handle()
    refused: int = 0  # closed unread: another uid (or over the cap with nothing to shed)
    shed: int = 0  # waiting for their frame, closed to make room for a newer connection
    answered: int = 0  # an ack was written
    dropped: int = 0  # closed without an ack (EOF, stall, garbage, internal error)
    errors: int = 0  # unexpected exceptions caught in the handler


class Listener:
    """Serves one instance's socket; see the module docstring for what each peer gets."""

    def __init__(
        self,
        *,
        instance_id: str,
        spool: SpoolLike,
        sender_check: Callable[[Enqueue], bool],
        state: Callable[[], str],
        limits: Limits,
        io_timeout: float,
        max_connections: int = 32,
    ) -> None:
        self._instance_id = instance_id
        self._spool = spool
        self._sender_check = sender_check
        self._state = state
        self._limits = limits
        self._io_timeout = io_timeout
        self._max_connections = max_connections
        # Connections served by a task of their own, oldest first, each with the scope
        # that sheds it; those in ``_answering`` have a decided request and are never shed.
        self._in_tasks: dict[int, trio.CancelScope] = {}
        self._answering: set[int] = set()
        self._next_task = 0
        self._uid = os.getuid()
        self._stats = ListenerStatistics()

    def statistics(self) -> ListenerStatistics:
        return attrs.evolve(self._stats)

    async def serve(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections until cancelled; ``started()`` once the listeners accept.

        Like ``trio.serve_listeners``, it closes the listeners when it ends. Accepting works
        on a duplicate of each listening descriptor with plain non-blocking calls: a
        connection whose request has fully arrived is served without a single pass through
        the scheduler."""
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                listening = wire.duplicate_socket(
                    listener.socket
                )  # before started(): no descriptor appears later
                nursery.start_soon(self._accept_loop, listener, listening, nursery)
            task_status.started(listeners)

    async def _accept_loop(
        self, listener: trio.SocketListener, listening: socket.socket, nursery: trio.Nursery
    ) -> None:
        listening.setblocking(False)
        accepted = 0
        try:
            while True:
                try:
                    conn, _ = listening.accept()
                except BlockingIOError:
                    await trio.lowlevel.wait_readable(listening)
                    continue
                except OSError as exc:
                    if exc.errno not in _ACCEPT_PRESSURE:
                        raise
                    _log.warning("relay accept failed: %s", exc)
                    await trio.sleep(_ACCEPT_BACKOFF)  # out of descriptors: let some close
                    continue
                self._admit(SocketConnection(conn), nursery)
                accepted += 1
                if accepted % _ACCEPT_BATCH == 0:
                    await trio.lowlevel.checkpoint()  # a flood must not starve other tasks
        finally:
            listening.close()
            listener.socket.close()

    def _admit(self, stream: SocketConnection, nursery: trio.Nursery) -> None:
        """Refuse another uid, unread; serve a request that has fully arrived at once; give
        anything else a task of its own, shedding the oldest connection still waiting for
        its frame while ``max_connections`` tasks are running."""
        peer = peer_credentials(stream)
        if peer is not None and peer.uid != self._uid:
            self._refuse(stream)
        elif self._serve_at_once(stream, peer):
            pass
        elif len(self._in_tasks) >= self._max_connections and not self._shed_oldest():
            self._refuse(stream)  # every task is writing an ack: nothing waits to be shed
        else:
            key, self._next_task = self._next_task, self._next_task + 1
            self._in_tasks[key] = scope = trio.CancelScope()
            nursery.start_soon(self._serve_in_task, key, scope, stream, peer)

    def _refuse(self, stream: SocketConnection) -> None:
        self._stats.refused += 1
        stream.socket.close()

    def _shed_oldest(self) -> bool:
        """Cancel the oldest task still reading its frame; ``False`` if there is none. It
        leaves the count at once, so the cap holds however soon the task notices."""
        for key, scope in self._in_tasks.items():
            if key not in self._answering:
                del self._in_tasks[key]
                scope.cancel()
                self._stats.shed += 1
                return True
        return False

    def _serve_at_once(self, stream: SocketConnection, peer: PeerCred | None) -> bool:
        """Answer a connection whose whole request is already readable, without a task and
        without waiting, and close it; ``False`` (nothing read) when the request is not
        all there, is malformed or cannot be peeked: the task path deals with those.
        An ack the socket does not take at once (it always does: a fresh connection and a
        few hundred bytes) is dropped, which the sender resolves by its one retry."""
        payload = wire.peek_whole_frame(stream.socket, self._limits.max_bytes)
        if payload is None:
            return False
        self._stats.handled += 1
        answered = False
        try:
            frame = self._frame(self._decide(payload, peer))
            answered = stream.socket.send(frame) == len(frame)
        except OSError:
            pass  # the peer hung up
        except Exception:
            self._stats.errors += 1
            _log.exception("relay connection failed")
        finally:
            self._count(answered)
            stream.socket.close()
        return True

    async def _serve_in_task(
        self, key: int, scope: trio.CancelScope, stream: SocketConnection, peer: PeerCred | None
    ) -> None:
        # A decided request is never shed: its ack is written under io_timeout.
        try:
            with scope:
                await self.handle(stream, peer, on_answer=lambda: self._answering.add(key))
        finally:
            self._in_tasks.pop(key, None)
            self._answering.discard(key)

    async def handle(
        self,
        stream: trio.abc.Stream,
        peer: PeerCred | None,
        *,
        on_answer: Callable[[], None] | None = None,
    ) -> None:
        """Serve one connection to its end; never raises but ``trio.Cancelled``.
        ``on_answer`` is called once the frame is read and decided, before the ack is
        written."""
        self._stats.handled += 1
        self._stats.active += 1
        answered = False
        try:
            with trio.move_on_after(self._io_timeout) as deadline:
                ack = await self._read_and_decide(stream, peer)
                if ack is not None:
                    if on_answer is not None:
                        on_answer()
                    deadline.deadline = trio.current_time() + self._io_timeout
                    await stream.send_all(self._frame(ack))
                    answered = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the peer hung up
        except Exception:
            self._stats.errors += 1
            _log.exception("relay connection failed")
        finally:
            self._stats.active -= 1
            self._count(answered)
            await _close(stream)

    def _count(self, answered: bool) -> None:
        if answered:
            self._stats.answered += 1
        else:
            self._stats.dropped += 1

    def _frame(self, ack: Ack) -> bytes:
        return encode_frame(encode_envelope(ack), max_bytes=self._limits.max_bytes)

    async def _read_and_decide(self, stream: trio.abc.Stream, peer: PeerCred | None) -> Ack | None:
        """The answer to the connection's frame, or ``None`` to close without one (end of
        stream mid-frame, or not our protocol). The caller's deadline bounds the read."""
        decoder = FrameDecoder(max_bytes=self._limits.max_bytes)
        try:
            payload = await _read_frame(stream, decoder)
        except FrameError as exc:
            _log.info("relay frame refused: %s", exc)
            return _ack("", "invalid") if decoder.header_recognized else None
        if payload is None:
            return None
        return self._decide(payload, peer)

    def _decide(self, payload: bytes, peer: PeerCred | None) -> Ack:
        try:
            request = decode_request(payload, my_instance_id=self._instance_id, limits=self._limits)
        except Rejected as exc:
            _log.info("relay request refused: %s", exc)
            return _ack(exc.message_id, exc.status)
        if isinstance(request, Ping):
            return _ack(request.message_id, "pong", state=self._state())
        if not self._sender_check(request):
            _log.info("relay sender %s is not registered", request.sender_instance_id)
            return _ack(request.message_id, "invalid")
        verified = peer is not None and peer.pid == request.sender_pid
        status, position = self._spool.enqueue(request, verified=verified)
        return _ack(request.message_id, status, queue_position=position)


def _ack(
    message_id: str, status: str, *, queue_position: int | None = None, state: str | None = None
) -> Ack:
    return Ack(1, "ack", message_id, status, queue_position, state)


async def _read_frame(stream: trio.abc.Stream, decoder: FrameDecoder) -> bytes | None:
    """The payload, or ``None`` at end of stream before it was complete."""
    while True:
        chunk = await stream.receive_some(decoder.wanted())
        if not chunk:
            return None
        payload = decoder.feed(chunk)
        if payload is not None:
            return payload


async def _close(stream: trio.abc.Stream) -> None:
    if isinstance(stream, SocketConnection):
        stream.socket.close()  # cannot wait and cannot be cancelled: no scope needed
        return
    # Shielded, so that the stream is closed even when the connection is being cancelled;
    # bounded, for streams whose close could wait.
    with trio.move_on_after(_CLOSE_GRACE, shield=True):
        await stream.aclose()
