"""What the worker runs next: the fair order of the spec, as a pure function.

The spec: "before accepting the next keyboard submission, the main loop claims one queued
relay". So relayed messages and the local queue (prompts and idle-only commands, in the
order typed) take turns: after a local item, one waiting relayed message runs first; after
a relayed turn, the next local item runs, if any. A prompt the user queued thus waits for at
most one relayed turn, and relayed messages wait for at most one local item each.

Which relayed messages may be claimed at all is the inbound machine's to say
(``zcoder.relay.inbound``: its hold policy is ``relay/inbound/policy.py``).
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["Next", "QueueState", "next_work"]

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
