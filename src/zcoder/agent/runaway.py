"""The runaway guard: a streamed reply repeating the same chunk over and over (pure, no I/O).

Small models sometimes fall into a loop and print one sentence, line or paragraph again and
again until the output cap (minutes on a CPU). ``RunawayDetector`` is fed the deltas of one
stream (content and thinking get one each) and trips when the end of the text is one chunk
repeated at least ``min_repeats`` times over at least ``min_chars`` characters. Both bounds
keep ordinary text safe: a markdown rule or a short list of similar lines is far below them,
and a table or a list whose rows differ is not a repetition at all.
"""

from __future__ import annotations

import attrs

__all__ = ["RunawayDetector"]

# The end of the text that is looked for earlier: its previous occurrences give the
# candidate periods.
_PROBE = 24
_MAX_CANDIDATES = 32


@attrs.define
class RunawayDetector:
    """Feed deltas; ``tripped`` once the tail is a long run of one repeated chunk."""

    min_repeats: int = 8
    min_chars: int = 1200
    max_period: int = 2000
    # Checking after every token would cost a scan per token; every ``stride`` characters is
    # soon enough to stop a runaway.
    stride: int = 200
    tripped: bool = False
    period: int = 0
    _text: str = ""
    _unchecked: int = 0

    @property
    def _keep(self) -> int:
        return max(self.min_chars, self.min_repeats * self.max_period) + _PROBE

    def feed(self, delta: str) -> bool:
        """Add one delta; True once the stream is a runaway (and from then on)."""
        if self.tripped or not delta:
            return self.tripped
        self._text = (self._text + delta)[-self._keep :]
        self._unchecked += len(delta)
        if self._unchecked >= self.stride:
            self._unchecked = 0
            self.period = self._repeated_period()
            self.tripped = self.period > 0
        return self.tripped

    def _repeated_period(self) -> int:
        """The smallest period of a long enough repetition at the end of the text, or 0."""
        text = self._text
        if len(text) < self.min_chars:
            return 0
        probe = text[-_PROBE:]
        # rfind's end bound holds whole occurrences: ``stop`` excludes the probe itself.
        stop = len(text) - 1
        for _ in range(_MAX_CANDIDATES):
            found = text.rfind(probe, 0, stop)
            period = len(text) - _PROBE - found
            if found < 0 or period > self.max_period:
                return 0
            if self._repeats(period):
                return period
            stop = found + _PROBE - 1  # the next candidate starts before this one
        return 0

    def _repeats(self, period: int) -> bool:
        span = max(self.min_chars, self.min_repeats * period)
        if span > len(self._text):
            return False
        tail = self._text[-span:]
        # Periodic with ``period`` exactly when the tail equals itself shifted by it.
        return tail[period:] == tail[:-period]
