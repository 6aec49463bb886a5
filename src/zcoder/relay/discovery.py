"""``discover``: the live peers, found by ``registry``'s steps, their pongs awaited in Trio.

The discovery of the running app (``/list-agents``, the ``list_agents`` tool, a send's
target): every ping waits in its own task of one nursery, each under ``io_timeout``.
``zcoder agents`` runs the same steps without an event loop (``blocking.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from zcoder.errors import RelayError
from zcoder.relay import client
from zcoder.relay.limits import DEFAULT_MAX_BYTES
from zcoder.relay.paths import manifest_name
from zcoder.relay.registry import (
    Candidate,
    Peer,
    candidates,
    close_all,
    dropped,
    found,
    list_sender,
    sorted_peers,
)

__all__ = ["discover"]


async def _probe(
    candidate: Candidate, sender: str, max_bytes: int, io_timeout: float, out: list[Peer]
) -> None:
    manifest, pending = candidate
    name = manifest_name(manifest.instance_id)
    with trio.move_on_after(io_timeout) as waiting:
        try:
            if pending is None:
                ack = await client.ping(
                    Path(manifest.socket),
                    target_instance_id=manifest.instance_id,
                    sender_instance_id=sender,
                    max_bytes=max_bytes,
                )
            else:
                ack = await client.finish_ping(pending, max_bytes=max_bytes)
        except (RelayError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            dropped(name, str(exc))  # a reused pid's other listener, garbage: not a peer
            return
        out.append(found(manifest, ack))
    if waiting.cancelled_caught:
        dropped(name, f"no answer to the ping within {io_timeout:g} s")


async def discover(
    relay_dir: Path,
    *,
    exclude_instance_id: str | None,
    io_timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Peer]:
    """The live peers in ``relay_dir`` other than ``exclude_instance_id``, found by the
    bounded steps of ``registry`` and sorted by project (case-insensitive), then pid, then
    instance id. A missing directory has no peers; an unreadable one is a ``RelayError``.
    Read-only: stale files are skipped, never removed."""
    # A bounded number of cheap system calls on a local (usually tmpfs) directory: inline.
    sender = list_sender(exclude_instance_id)
    found_now = candidates(os.fspath(relay_dir), exclude_instance_id, sender, max_bytes)
    peers: list[Peer] = []
    started = 0
    try:
        async with trio.open_nursery() as nursery:
            for candidate in found_now:
                nursery.start_soon(_probe, candidate, sender, max_bytes, io_timeout, peers)
                started += 1
    finally:
        close_all(found_now[started:])  # each probe closes its own socket
    return sorted_peers(peers)
