"""What the worker runs next: the fair order of the spec, as a pure function.

The spec: "before accepting the next keyboard submission, the main loop claims one queued
relay". So relayed messages and the local queue (prompts and idle-only commands, in the
order typed) take turns: after a local item, one waiting relayed message runs first; after
a relayed turn, the next local item runs, if any. A prompt the user queued thus waits for at
most one relayed turn, and relayed messages wait for at most one local item each.

Which relayed messages may be claimed at all is the inbound policy (``hold_reason``): a
message is *held* for the local user when its sender's peer credentials did not verify
(always), when the instance holds every message (``ZCODER_RELAY_INBOUND=hold``, ``/agents
hold``), or when it looks like a loop rather than work: its hop count (zcoder's extension:
how many relayed turns led to it) reached ``ZCODER_RELAY_MAX_HOPS``, or, from a peer that
sends no hop count, the round trips with that peer since the last local turn (``RoundTrips``:
relayed turns from it in which this instance sent back to it) reached the same bound. One-way
work, however much of it, is never held. A held message runs only once the user approves it.
"""

from __future__ import annotations

from typing import Literal

import attrs

from zcoder.config import INBOUND_MODES, InboundMode
from zcoder.relay.limits import DEFAULT_MAX_HOPS

__all__ = [
    "INBOUND_MODES",
    "HoldReason",
    "InboundMode",
    "Next",
    "QueueState",
    "RoundTrips",
    "hold_reason",
    "next_work",
]

HoldReason = Literal["", "hold", "unverified", "hops", "round_trips"]

Next = Literal["relay", "local"] | None


@attrs.frozen
class QueueState:
    """What the worker knows between turns.

    ``local``: items in the local queue. ``relay``: a relayed message may be claimed now
    (one waits, the relay is neither paused nor stopped, the model is not known to be down).
    ``last_was_relay``: the previous work item was a relayed turn.
    """

    local: int
    relay: bool
    last_was_relay: bool = False


def next_work(state: QueueState) -> Next:
    """``relay`` (claim one message), ``local`` (the oldest local item) or ``None`` (wait)."""
    if state.relay and not (state.local and state.last_was_relay):
        return "relay"
    if state.local:
        return "local"
    return None


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
