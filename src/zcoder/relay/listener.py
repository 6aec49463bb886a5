"""The receiving side: the instance's Unix socket, served by ``trio.serve_listeners``.

``Listener.serve`` is ``trio.serve_listeners`` over the bound ``trio.SocketListener``: each
accepted connection is a ``trio.SocketStream`` in a handler task of its own. Per
connection, and nothing else: read one frame under ``io_timeout`` (header and payload
together), validate it, run the sender check, store it through the spool, write one ack
under ``io_timeout``, close. It never touches the agent, the session or the UI.

The handler first takes what has already arrived (``wire.bytes_ready``, no waiting). If
that is a whole request (the usual case: clients write right after connecting), it is
answered there and then and takes no place under the cap; only a connection that must
wait for the rest of its frame is admitted under ``max_connections``. Both give the same
answers.

What a peer gets:

* another uid (Linux ``SO_PEERCRED``): closed before anything is read;
* a request that has fully arrived when its handler starts: always answered, whatever the
  number of other connections;
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
  refuses to store is ``full`` too); a ping gets ``pong`` with the instance's ``state``
  (and, zcoder's extension, ``model_state`` once the app knows whether its model server
  answers);
* zcoder's extension (``receipt``, ``cancel``): without an ``extension`` handler,
  ``unsupported`` as from a version-1 peer; with one, the sender check, then the status
  the handler decides. With a handler, an ``accepted`` enqueue's ack carries
  ``"receipts":true`` (an optional key a version-1 sender ignores);
* an unexpected failure inside the spool or the sender check: closed without an answer
  (ambiguous for the sender, who retries once with the same id).

The handler catches its own errors (an exception escaping a ``serve_listeners`` handler
would end the app); ``trio.Cancelled`` propagates. ``verified`` passed to the spool is true
when the connecting process's pid (``SO_PEERCRED``) equals ``sender_pid``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
from collections.abc import Callable
from typing import Protocol

import attrs
import trio

from zcoder.errors import FrameError
from zcoder.relay import wire
from zcoder.relay.envelope import (
    Ack,
    Cancel,
    Enqueue,
    Limits,
    Ping,
    Receipt,
    Rejected,
    decode_request,
    encode_envelope,
    prepare_decoders,
)
from zcoder.relay.protocol import FrameDecoder, encode_frame
from zcoder.relay.wire import PeerCred, open_unix_listener, peer_credentials

__all__ = [
    "Extension",
    "Listener",
    "ListenerStatistics",
    "PeerCred",
    "SpoolLike",
    "open_unix_listener",
    "peer_credentials",
]

_log = logging.getLogger(__name__)

# Called once a connection is found to wait for the rest of its frame; False: close it.
Admit = Callable[[], bool]
# zcoder's extension: decides a receipt or a cancel that passed the sender check, given
# whether peer credentials confirmed its sender's pid; returns the ack status.
Extension = Callable[[Receipt | Cancel, bool], str]


class SpoolLike(Protocol):
    """What the listener needs from the spool (``relay/spool/store.py``)."""

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]: ...

    @property
    def paused(self) -> bool: ...


@attrs.define
class ListenerStatistics:
    """Counters for tests and diagnostics."""

    active: int = 0  # connections whose frame is being read now
    handled: int = 0  # connections given to handle()
    refused: int = 0  # closed before waiting: another uid, or over the cap, nothing to shed
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
        sender_check: Callable[[Enqueue | Receipt | Cancel], bool],
        state: Callable[[], str],
        limits: Limits,
        model_state: Callable[[], str | None] = lambda: None,
        io_timeout: float,
        max_connections: int = 32,
        extension: Extension | None = None,
    ) -> None:
        prepare_decoders()  # before the socket is bound: the first ping need not wait
        self._instance_id = instance_id
        self._extension = extension
        self._spool = spool
        self._sender_check = sender_check
        self._state = state
        self._model_state = model_state
        self._limits = limits
        self._io_timeout = io_timeout
        self._max_connections = max_connections
        # Connections that had to wait for their frame, each with the scope that sheds it;
        # those in ``_answering`` have a decided request and are never shed.
        self._waiting: dict[int, trio.CancelScope] = {}
        self._answering: set[int] = set()
        self._keys = itertools.count()
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
        """``trio.serve_listeners`` with ``handle_connection``: accept until cancelled,
        ``started()`` once the listeners accept, close them when it ends."""
        await trio.serve_listeners(self.handle_connection, listeners, task_status=task_status)

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """The ``serve_listeners`` handler: refuse another uid unread, else serve the
        connection under the cap. ``serve_listeners`` closes the stream afterwards (one
        close, not two: each is a scheduler pass and a raised ``Cancelled``). Never raises
        but ``trio.Cancelled``."""
        try:
            peer = peer_credentials(stream)
            if peer is not None and peer.uid != self._uid:
                self._stats.refused += 1
                return
            key = next(self._keys)
            scope = trio.CancelScope()
            try:
                with scope:
                    await self._serve(
                        stream,
                        peer,
                        admit=functools.partial(self._admit, key, scope),
                        on_answer=functools.partial(self._answering.add, key),
                    )
            finally:
                self._waiting.pop(key, None)
                self._answering.discard(key)
        except Exception:  # a bug here must not end serve_listeners, hence the app
            self._stats.errors += 1
            _log.exception("relay connection failed")

    def _admit(self, key: int, scope: trio.CancelScope) -> bool:
        """Give a waiting connection its place, shedding the oldest waiting one at the cap;
        ``False`` when every place is taken by a connection writing its ack."""
        if len(self._waiting) >= self._max_connections and not self._shed_oldest():
            self._stats.refused += 1
            return False
        self._waiting[key] = scope
        return True

    def _shed_oldest(self) -> bool:
        """Cancel the oldest connection still reading its frame; ``False`` if there is none.
        It leaves the count at once, so the cap holds however soon its task notices."""
        # Keys count connections in the order they were accepted; a connection is admitted
        # only after its first read, which may come later for an older one.
        reading = [key for key in self._waiting if key not in self._answering]
        if not reading:
            return False
        self._waiting.pop(min(reading)).cancel()
        self._stats.shed += 1
        return True

    async def handle(self, stream: trio.abc.Stream, peer: PeerCred | None) -> None:
        """Serve one connection of any stream to its end, with no cap, and close it;
        never raises but ``trio.Cancelled``."""
        try:
            await self._serve(stream, peer)
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve(
        self,
        stream: trio.abc.Stream,
        peer: PeerCred | None,
        *,
        admit: Admit | None = None,
        on_answer: Callable[[], None] | None = None,
    ) -> None:
        """Read, decide and answer; the caller closes the stream. ``admit`` is asked once
        the bytes already there are not a whole request, before waiting for more;
        ``on_answer`` is called once the frame is read and decided, before the ack is
        written."""
        self._stats.handled += 1
        answered = False
        try:
            with trio.move_on_after(self._io_timeout) as deadline:
                ack = await self._read_and_decide(stream, peer, admit)
                if ack is not None:
                    if on_answer is not None:
                        on_answer()
                    deadline.deadline = trio.current_time() + self._io_timeout
                    frame = self._frame(ack)
                    sent = wire.send_now(stream, frame)  # a small ack: all of it, usually
                    if sent < len(frame):
                        await stream.send_all(frame[sent:])
                    answered = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the peer hung up
        except Exception:
            self._stats.errors += 1
            _log.exception("relay connection failed")
        finally:
            self._stats.answered += answered
            self._stats.dropped += not answered

    def _frame(self, ack: Ack) -> bytes:
        return encode_frame(encode_envelope(ack), max_bytes=self._limits.max_bytes)

    async def _read_and_decide(
        self, stream: trio.abc.Stream, peer: PeerCred | None, admit: Admit | None
    ) -> Ack | None:
        """The answer to the connection's frame, or ``None`` to close without one (end of
        stream mid-frame, not our protocol, not admitted). The caller's deadline bounds
        the read."""
        decoder = FrameDecoder(max_bytes=self._limits.max_bytes)
        self._stats.active += 1
        try:
            payload = await _read_frame(stream, decoder, admit)
        except FrameError as exc:
            _log.info("relay frame refused: %s", exc)
            return _ack("", "invalid") if decoder.header_recognized else None
        finally:
            self._stats.active -= 1
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
            model = self._model_state()
            return _ack(request.message_id, "pong", state=self._state(), model_state=model)
        if not isinstance(request, Enqueue) and self._extension is None:
            return _ack(request.message_id, "unsupported")
        if not self._sender_check(request):
            _log.info("relay sender %s is not registered", request.sender_instance_id)
            return _ack(request.message_id, "invalid")
        verified = peer is not None and peer.pid == request.sender_pid
        if not isinstance(request, Enqueue):
            assert self._extension is not None
            return _ack(request.message_id, self._extension(request, verified))
        status, position = self._spool.enqueue(request, verified=verified)
        receipts = True if self._extension is not None and status == "accepted" else None
        return _ack(request.message_id, status, queue_position=position, receipts=receipts)


def _ack(
    message_id: str,
    status: str,
    *,
    queue_position: int | None = None,
    state: str | None = None,
    receipts: bool | None = None,
    model_state: str | None = None,
) -> Ack:
    return Ack(1, "ack", message_id, status, queue_position, state, receipts, model_state)


async def _read_frame(
    stream: trio.abc.Stream, decoder: FrameDecoder, admit: Admit | None
) -> bytes | None:
    """The payload, or ``None`` at end of stream before it was complete or when ``admit``
    refuses a connection that would have to wait."""
    ready = wire.bytes_ready(stream)
    if ready:  # a read that cannot wait: the whole request, usually
        now = wire.receive_now(stream, min(ready, decoder.wanted()))
        chunk = now if now is not None else await stream.receive_some(min(ready, decoder.wanted()))
        if not chunk:
            return None
        payload = decoder.feed(chunk)
        if payload is not None:
            return payload
    if admit is not None and not admit():
        return None
    while True:
        chunk = await stream.receive_some(decoder.wanted())
        if not chunk:
            return None
        payload = decoder.feed(chunk)
        if payload is not None:
            return payload
