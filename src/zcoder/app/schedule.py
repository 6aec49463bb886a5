"""What the worker runs next: the fair order of the spec, as a pure function.

The spec: "before accepting the next keyboard submission, the main loop claims one queued
relay". So relayed messages and the local queue (prompts and idle-only commands, in the
order typed) take turns: after a local item, one waiting relayed message runs first; after
a relayed turn, the next local item runs, if any. A prompt the user queued thus waits for at
most one relayed turn, and relayed messages wait for at most one local item each.

Which relayed messages may be claimed at all is the inbound policy (``hold_reason``): a
message is *held* for the local user when the instance holds every message
(``ZCODER_RELAY_INBOUND=hold``, ``/agents hold``), when its sender's peer credentials did
not verify (always), or when the relayed exchanges with its sender since the last local
turn reached ``EXCHANGE_BOUND`` (``Exchanges``), so that two models cannot keep replying to
each other without a person. A held message runs only once the user approves it.
"""

from __future__ import annotations

from typing import Literal

import attrs

from zcoder.config import INBOUND_MODES, InboundMode

__all__ = [
    "EXCHANGE_BOUND",
    "INBOUND_MODES",
    "Exchanges",
    "HoldReason",
    "InboundMode",
    "Next",
    "QueueState",
    "hold_reason",
    "next_work",
]

#: Relayed exchanges with one peer since the last local turn after which its next message
#: is held: enough for a question, an answer and a few follow-ups, not for a loop.
EXCHANGE_BOUND = 6
HoldReason = Literal["", "hold", "unverified", "bound"]

Next = Literal["relay", "local"] | None


@attrs.frozen
class QueueState:
    """What the worker knows between turns.

    ``local``: items in the local queue. ``relay``: a relayed message may be claimed now
    (one waits, the relay is neither paused nor held, the model is not known to be down).
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
    mode: InboundMode, *, verified: bool, exchanges: int, bound: int = EXCHANGE_BOUND
) -> HoldReason:
    """Why a newly waiting relayed message is held (``""``: it runs in its turn).

    An unverified sender is held whatever the mode (its pid and project are only its own
    word); then ``hold`` mode; then the exchange bound: ``exchanges`` counted with the
    sender since the last local turn, held once it reached ``bound``."""
    if not verified:
        return "unverified"
    if mode == "hold":
        return "hold"
    if exchanges >= bound:
        return "bound"
    return ""


@attrs.define
class Exchanges:
    """Relayed exchanges per peer (instance id) since the last local user turn here.

    One exchange is a relayed turn run for the peer or a message sent to it. The spec's
    enqueue carries no count in version 1, so the peer's own local turns cannot reset this
    side's count: only a local turn here does (``local_turn``), or the user approving a
    held message of that peer (``reset``). An approximation that errs towards holding."""

    counts: dict[str, int] = attrs.Factory(dict)

    def count(self, peer: str) -> int:
        return self.counts.get(peer, 0)

    def add(self, peer: str) -> int:
        """Count one exchange with ``peer``; the new count."""
        self.counts[peer] = self.count(peer) + 1
        return self.counts[peer]

    def reset(self, peer: str) -> None:
        self.counts.pop(peer, None)

    def local_turn(self) -> None:
        self.counts.clear()
