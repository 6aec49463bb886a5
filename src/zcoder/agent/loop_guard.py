"""Turn guards: repeated tool rounds, empty replies and the step ceiling (pure, no I/O).

Small local models sometimes get stuck: they call the same tools with the same arguments
round after round, or answer with nothing. The loop asks a ``TurnGuard`` after every model
reply what to do; the guard only counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

import attrs

from zcoder.conversation import ToolCall

__all__ = [
    "EMPTY_REPLY_NUDGE",
    "MAX_EMPTY_NUDGES",
    "MAX_STEPS",
    "REPEAT_WARNING",
    "RoundVerdict",
    "TurnGuard",
    "round_signature",
]

MAX_STEPS = 40
MAX_EMPTY_NUDGES = 2
EMPTY_REPLY_NUDGE = (
    "Your last reply was empty. Answer the request, call a tool, or call finish if you are done."
)
REPEAT_WARNING = (
    "You are repeating the same tool calls with the same arguments as in your previous step, "
    "and the results will not change. Use the results you already have: take a different "
    "step, answer, or call finish. If you repeat these calls again, the turn will be stopped."
)

RoundVerdict = Literal["ok", "warn", "stop"]


def round_signature(calls: Sequence[ToolCall]) -> tuple[tuple[str, str], ...]:
    """Names and canonical arguments of one round, in order (call ids are ignored)."""
    return tuple(
        (c.name, json.dumps(dict(c.arguments), sort_keys=True, default=str) + c.problem)
        for c in calls
    )


@attrs.define
class TurnGuard:
    """Counts within one turn; a fresh guard per turn."""

    max_steps: int = MAX_STEPS
    max_nudges: int = MAX_EMPTY_NUDGES
    steps: int = 0
    nudges: int = 0
    warned: bool = False
    _last: tuple[tuple[str, str], ...] = ()

    def take_step(self) -> bool:
        """Count one model call; False when the ceiling is already reached."""
        if self.steps >= self.max_steps:
            return False
        self.steps += 1
        return True

    def take_nudge(self) -> bool:
        """Count one empty reply; True while another nudge is allowed."""
        self.nudges += 1
        return self.nudges <= self.max_nudges

    def check_round(self, calls: Sequence[ToolCall]) -> RoundVerdict:
        """``warn`` on the first repeat of the previous round, ``stop`` on any later one.

        The warning is given once per turn: after it, any exact repeat stops the turn, even
        if other rounds came in between, because the model has been told.
        """
        signature = round_signature(calls)
        repeated = bool(signature) and signature == self._last
        self._last = signature
        if not repeated:
            return "ok"
        if self.warned:
            return "stop"
        self.warned = True
        return "warn"
