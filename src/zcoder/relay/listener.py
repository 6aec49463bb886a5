"""The receiving side: the instance's Unix socket.

``Listener.serve`` accepts on the bound ``trio.SocketListener`` as ``trio.serve_listeners``
does (the same contract: ``started()`` once it accepts, accept errors of a full descriptor
table ridden out), each accepted connection a ``trio.SocketStream``. Per connection, and
nothing else: read one frame under ``io_timeout`` (header and payload together), validate
it, run the sender check, store it through the spool, write one ack under ``io_timeout``,
close. It never touches the agent, the session or the UI.

The accepting task first takes what has already arrived (``wire.bytes_ready``, no
waiting). If that is a whole request (the usual case: clients write right after
connecting), it is answered and the socket closed there and then, in the scheduler pass
that accepted it: no task of its own, no place under the cap (in the app each pass is a
turn of the asyncio loop that hosts Trio). Only a connection that must wait for the rest
of its frame (or, rarely, for its ack to be written) gets a task of its own in the
listener's nursery, and only one waiting for its frame is admitted under
``max_connections``. Both give the same answers. ``handle_connection`` is the same service
as a ``trio.serve_listeners`` handler.

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

Serving a connection catches its own errors (an exception escaping it would end the
accept loop, hence the app); ``trio.Cancelled`` propagates. ``verified`` passed to the
spool is true when the connecting process's pid (``SO_PEERCRED``) equals ``sender_pid``.

Longer than 400 lines on purpose: a connection's service is one path from the accept to
the close, split only where it must wait (``_start`` at once, ``_finish`` in a task), and
the cap's bookkeeping belongs to the same connections; cut apart, the answer to a peer
would be decided in two places.
"""

from __future__ import annotations

import errno
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

# As trio.serve_listeners: out of descriptors or memory is a load to ride out, not an end.
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_ACCEPT_RETRY = 0.1

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


@attrs.define
class _Rest:
    """A connection that could not be served without waiting: its frame so far, and the
    ack's bytes the socket did not take at once (empty while the frame is incomplete)."""

    stream: trio.abc.Stream
    peer: PeerCred | None
    decoder: FrameDecoder
    unsent: bytes = b""


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
        """Accept on ``listeners`` until cancelled, ``started()`` once they accept, close
        them when it ends (``trio.serve_listeners``' contract, and its handling of accept
        errors). A connection that needs no waiting (the usual: its whole request has
        arrived by the time it is accepted) is answered and closed by the accepting task in
        the pass that accepted it; only one that must wait gets a task of its own, in this
        nursery."""
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept_loop, listener, nursery)
            task_status.started(listeners)

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                        raise
                    _log.error("relay accept failed (%s); again in %s s", exc, _ACCEPT_RETRY)
                    await trio.sleep(_ACCEPT_RETRY)
                    continue
                rest = self._start_connection(stream)
                if rest is None:
                    stream.socket.close()  # SocketStream.aclose would add a scheduler pass
                else:
                    nursery.start_soon(self._serve_rest_and_close, rest)

    async def _serve_rest_and_close(self, rest: _Rest) -> None:
        try:
            await self._serve_rest(rest)
        finally:
            await trio.aclose_forcefully(rest.stream)

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        """The same service as a ``trio.serve_listeners`` handler (which closes the stream
        afterwards). Never raises but ``trio.Cancelled``."""
        rest = self._start_connection(stream)
        if rest is not None:
            await self._serve_rest(rest)

    def _start_connection(self, stream: trio.SocketStream) -> _Rest | None:
        """Refuse another uid unread, else serve the connection as far as it goes without
        waiting (``_start``). Never raises."""
        try:
            peer = peer_credentials(stream)
            if peer is not None and peer.uid != self._uid:
                self._stats.refused += 1
                return None
            return self._start(stream, peer)
        except Exception:  # a bug here must not end the accept loop, hence the app
            self._stats.errors += 1
            _log.exception("relay connection failed")
            return None

    async def _serve_rest(self, rest: _Rest) -> None:
        """What ``_start`` left, in the connection's own task, under the cap: a connection
        still waiting for its frame holds a place (and may be shed), one writing its ack
        never is. Never raises but ``trio.Cancelled``."""
        key = next(self._keys)
        scope = trio.CancelScope()
        try:
            with scope:
                await self._finish(
                    rest,
                    admit=functools.partial(self._admit, key, scope),
                    on_answer=functools.partial(self._answering.add, key),
                )
        finally:
            self._waiting.pop(key, None)
            self._answering.discard(key)

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
            rest = self._start(stream, peer)
            if rest is not None:
                await self._finish(rest)
        finally:
            await trio.aclose_forcefully(stream)

    def _start(self, stream: trio.abc.Stream, peer: PeerCred | None) -> _Rest | None:
        """Read what has arrived (no waiting) and, if that is a whole request, decide it and
        write what the socket takes of the ack at once. ``None`` when the connection is
        done (answered, or to be closed without an answer); else what is left: the rest of
        the frame to wait for, or the rest of the ack to write. Never raises."""
        self._stats.handled += 1
        rest = _Rest(stream, peer, FrameDecoder(max_bytes=self._limits.max_bytes))
        try:
            ready = wire.bytes_ready(stream)
            chunk = wire.receive_now(stream, min(ready, rest.decoder.wanted())) if ready else None
            if chunk is None:
                return rest  # nothing yet (or not a socket): wait for it
            if not chunk:
                self._ended(answered=False)
                return None
            payload = rest.decoder.feed(chunk)
            if payload is None:
                return rest  # a part of the frame: wait for the rest
            ack: Ack | None = self._decide(payload, peer)
        except FrameError as exc:
            ack = self._refused_frame(exc, rest.decoder)
        except trio.BrokenResourceError:
            self._ended(answered=False)
            return None
        except Exception:
            self._stats.errors += 1
            _log.exception("relay connection failed")
            self._ended(answered=False)
            return None
        if ack is None:
            self._ended(answered=False)
            return None
        frame = self._frame(ack)
        try:
            sent = wire.send_now(stream, frame)  # a small ack: all of it, usually
        except trio.BrokenResourceError:
            self._ended(answered=False)
            return None
        if sent < len(frame):
            rest.unsent = frame[sent:]
            return rest
        self._ended(answered=True)
        return None

    def _ended(self, *, answered: bool) -> None:
        self._stats.answered += answered
        self._stats.dropped += not answered

    async def _finish(
        self,
        rest: _Rest,
        *,
        admit: Admit | None = None,
        on_answer: Callable[[], None] | None = None,
    ) -> None:
        """Wait for the rest of the frame (once ``admit`` gives the connection a place),
        decide it, write the ack, each under ``io_timeout``; the caller closes the stream.
        ``on_answer`` is called once the request is decided, before the ack is written."""
        answered = False
        try:
            with trio.move_on_after(self._io_timeout) as deadline:
                if not rest.unsent:
                    ack = await self._read_rest_and_decide(rest, admit)
                    if ack is None:
                        return
                    rest.unsent = self._frame(ack)
                    deadline.deadline = trio.current_time() + self._io_timeout
                if on_answer is not None:
                    on_answer()
                # At once first: no checkpoint, so a request stored in the spool gets its
                # ack even when a shed or a shut-down cancels this task meanwhile.
                sent = wire.send_now(rest.stream, rest.unsent)
                if sent < len(rest.unsent):
                    await rest.stream.send_all(rest.unsent[sent:])
                answered = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the peer hung up
        except Exception:
            self._stats.errors += 1
            _log.exception("relay connection failed")
        finally:
            self._ended(answered=answered)

    def _frame(self, ack: Ack) -> bytes:
        return encode_frame(encode_envelope(ack), max_bytes=self._limits.max_bytes)

    async def _read_rest_and_decide(self, rest: _Rest, admit: Admit | None) -> Ack | None:
        """The answer to the connection's frame, once the rest of it has arrived, or
        ``None`` to close without one (end of stream mid-frame, not admitted). The
        caller's deadline bounds the read."""
        self._stats.active += 1
        try:
            if admit is not None and not admit():
                return None
            while True:
                chunk = await rest.stream.receive_some(rest.decoder.wanted())
                if not chunk:
                    return None
                payload = rest.decoder.feed(chunk)
                if payload is not None:
                    break
        except FrameError as exc:
            return self._refused_frame(exc, rest.decoder)
        finally:
            self._stats.active -= 1
        return self._decide(payload, rest.peer)

    @staticmethod
    def _refused_frame(exc: FrameError, decoder: FrameDecoder) -> Ack | None:
        """A frame that breaks the format: ``invalid`` to a peer that spoke our magic,
        else no answer (it does not speak this protocol)."""
        _log.info("relay frame refused: %s", exc)
        return _ack("", "invalid") if decoder.header_recognized else None

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
