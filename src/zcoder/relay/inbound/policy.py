"""The inbound policy: why a newly arrived relayed message is held for the local user.

A message is *held* when its sender's peer credentials did not verify (always), when the
instance holds every message (``ZCODER_RELAY_INBOUND=hold``, ``/agents hold``), or when it
looks like a loop rather than work: its hop count (zcoder's extension: how many relayed
turns led to it) reached ``ZCODER_RELAY_MAX_HOPS``, or, from a peer that sends no hop count,
the round trips with that peer since the last local turn (``RoundTrips``: relayed turns from
it in which this instance sent back to it) reached the same bound. One-way work, however
much of it, is never held. A held message runs only once the user approves it. Pure.
"""

from __future__ import annotations

from typing import Literal

import attrs

from zcoder.relay.limits import DEFAULT_MAX_HOPS
from zcoder.relay.settings import InboundMode

__all__ = ["HoldReason", "RoundTrips", "hold_reason"]

HoldReason = Literal["", "hold", "unverified", "hops", "round_trips"]


def hold_reason(
    mode: InboundMode,
    *,
    verified: bool,
    hops: int | None,
    round_trips: int,
    max_hops: int = DEFAULT_MAX_HOPS,
) -> HoldReason:
    """Why a newly arrived relayed message is held (``""``: it runs in its turn).

    An unverified sender is held whatever the mode (its pid and project are only its own
    word); then ``hold`` mode; then a loop: ``hops`` (``None`` when the peer sent none)
    reached ``max_hops``, or, without a hop count, ``round_trips`` with the sender did."""
    if not verified:
        return "unverified"
    if mode == "hold":
        return "hold"
    if hops is not None:
        return "hops" if hops >= max_hops else ""
    return "round_trips" if round_trips >= max_hops else ""


@attrs.define
class RoundTrips:
    """Round trips per peer (instance id) since the last local user turn here: relayed turns
    run for the peer in which this instance sent a message back to it (each turn counts
    once). Only a loop makes them: one-way work, a peer's tasks that never send back, counts
    nothing. A local turn here starts every count again (``local_turn``), as does the user
    approving a held message of that peer (``reset``)."""

    counts: dict[str, int] = attrs.Factory(dict)

    def count(self, peer: str) -> int:
        return self.counts.get(peer, 0)

    def add(self, peer: str) -> int:
        """Count one round trip with ``peer``; the new count."""
        self.counts[peer] = self.count(peer) + 1
        return self.counts[peer]

    def reset(self, peer: str) -> None:
        self.counts.pop(peer, None)

    def local_turn(self) -> None:
        self.counts.clear()
