"""``discover_blocking``: ``registry``'s discovery with plain blocking waits, no event loop.

``zcoder agents`` lists the peers and exits; an event loop would be most of its start-up
(importing Trio), so it drives the same steps as ``discovery.discover`` itself: the same
candidates (``registry.candidates``: the directory bounds, the ``lstat`` checks of owner and
type, the manifest checks, the ping written at once), the same request and answer checks
(``ping.py``: bounded frames, a ``pong`` for that exact instance), and every answer awaited
concurrently under one deadline ``io_timeout`` after the pings went out, as the app's probes
are. A candidate whose listener's backlog was full connects again every ``_BACKLOG_RETRY``
until that deadline. Every socket is closed on return, whatever ends the wait.
"""

from __future__ import annotations

import os
import selectors
import time
from pathlib import Path

import attrs

from zcoder.errors import FrameError, RelayError, RelayTransportError
from zcoder.relay.envelope import Ack
from zcoder.relay.limits import DEFAULT_MAX_BYTES
from zcoder.relay.manifest import Manifest
from zcoder.relay.paths import manifest_name
from zcoder.relay.ping import (
    PendingPing,
    broke,
    closed_early,
    connect_nowait,
    malformed,
    pong,
    start_ping,
)
from zcoder.relay.protocol import FrameDecoder
from zcoder.relay.registry import Peer, candidates, dropped, found, list_sender, sorted_peers

__all__ = ["discover_blocking"]

_BACKLOG_RETRY = 0.002  # as ``wire.connect``: a full backlog drains in microseconds


@attrs.define
class _Probe:
    """One candidate's ping: not connected yet (``pending`` is ``None``) or under way."""

    manifest: Manifest
    pending: PendingPing | None
    decoder: FrameDecoder

    @property
    def name(self) -> str:
        return manifest_name(self.manifest.instance_id)


def _connect(probe: _Probe, sender: str, max_bytes: int) -> bool:
    """Connect a probe whose listener's backlog was full; ``False`` while it still is.
    ``RelayTransportError`` as ``client.ping`` says it."""
    try:
        sock = connect_nowait(probe.manifest.socket)
    except OSError as exc:
        where = probe.manifest.socket
        raise RelayTransportError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    if sock is None:
        return False
    target = probe.manifest.instance_id
    probe.pending = start_ping(
        sock, target_instance_id=target, sender_instance_id=sender, max_bytes=max_bytes
    )
    return True


def _step(pending: PendingPing, decoder: FrameDecoder) -> Ack | None:
    """Write what is left of the ping, else read what has arrived of the answer; the
    answer once it is complete. ``RelayError`` when the ping failed."""
    target = pending.request.target_instance_id
    try:
        if pending.unsent:
            pending.unsent = pending.unsent[pending.sock.send(pending.unsent) :]
            return None
        chunk = pending.sock.recv(decoder.wanted())
    except BlockingIOError:
        return None
    except OSError as exc:
        raise RelayTransportError(f"ping to {target} failed: {broke(exc)}") from None
    if not chunk:
        raise RelayTransportError(f"ping to {target} failed: {closed_early()}")
    try:
        payload = decoder.feed(chunk)
    except FrameError as exc:
        raise malformed(exc) from None
    return None if payload is None else pong(pending, payload)


def _events(pending: PendingPing) -> int:
    return selectors.EVENT_WRITE if pending.unsent else selectors.EVENT_READ


class _Round:
    """The probes of one discovery, while they wait; owns their sockets."""

    def __init__(self, probes: list[_Probe], sender: str, max_bytes: int) -> None:
        self._selector = selectors.DefaultSelector()
        self._connecting = [p for p in probes if p.pending is None]
        self._sender = sender
        self._max_bytes = max_bytes
        self.peers: list[Peer] = []
        for probe in probes:
            if probe.pending is not None:
                self._selector.register(probe.pending.sock, _events(probe.pending), probe)

    def waiting(self) -> bool:
        return bool(self._connecting or self._selector.get_map())

    def run(self, deadline: float) -> None:
        while self.waiting():
            self._retry_connects()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            timeout = min(left, _BACKLOG_RETRY) if self._connecting else left
            for key, _ in self._selector.select(timeout):
                self._advance(key.data)

    def _retry_connects(self) -> None:
        for probe in list(self._connecting):
            try:
                connected = _connect(probe, self._sender, self._max_bytes)
            except RelayError as exc:
                self._connecting.remove(probe)
                dropped(probe.name, str(exc))
                continue
            if connected and probe.pending is not None:
                self._connecting.remove(probe)
                self._selector.register(probe.pending.sock, _events(probe.pending), probe)

    def _advance(self, probe: _Probe) -> None:
        pending = probe.pending
        assert pending is not None  # only connected probes are registered
        try:
            ack = _step(pending, probe.decoder)
        except RelayError as exc:
            self._finish(pending)
            dropped(probe.name, str(exc))  # a reused pid's other listener, garbage
            return
        if ack is not None:
            self._finish(pending)
            self.peers.append(found(probe.manifest, ack))
        elif not pending.unsent:
            self._selector.modify(pending.sock, selectors.EVENT_READ, probe)

    def _finish(self, pending: PendingPing) -> None:
        self._selector.unregister(pending.sock)
        pending.sock.close()

    def close(self, io_timeout: float) -> None:
        """Drop every probe still waiting (no answer in time) and close its socket."""
        left = [p for p in self._connecting]
        for key in list(self._selector.get_map().values()):
            probe: _Probe = key.data
            assert probe.pending is not None
            self._finish(probe.pending)
            left.append(probe)
        self._connecting = []
        self._selector.close()
        for probe in sorted(left, key=lambda p: p.name):
            dropped(probe.name, f"no answer to the ping within {io_timeout:g} s")


def discover_blocking(
    relay_dir: Path,
    *,
    exclude_instance_id: str | None,
    io_timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Peer]:
    """What ``discovery.discover`` returns for the same directory, found without an event
    loop: the live peers, sorted; ``RelayError`` for an unreadable directory."""
    sender = list_sender(exclude_instance_id)
    probes = [
        _Probe(manifest, pending, FrameDecoder(max_bytes=max_bytes))
        for manifest, pending in candidates(
            os.fspath(relay_dir), exclude_instance_id, sender, max_bytes
        )
    ]
    deadline = time.monotonic() + io_timeout
    round_ = _Round(probes, sender, max_bytes)
    try:
        round_.run(deadline)
    finally:
        round_.close(io_timeout)
    return sorted_peers(round_.peers)
