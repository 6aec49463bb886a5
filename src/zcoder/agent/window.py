"""The context window a turn works in, and how full a prompt makes it (pure, no I/O).

- ``decide_window``: the smaller of what the server reports for the model and what zcoder
  is configured to use (``--context-window``, else ``DEFAULT_NUM_CTX``). For Ollama the
  decided window is also the ``num_ctx`` sent, so the server never runs a larger one.
- ``estimate_tokens``: a rough prompt size, four characters a token.
- ``Calibration``: real tokenizers differ from four characters a token (SmolLM2's ran 12-15 %
  above the estimate); the prompt token counts the server reports correct the estimate.
- ``context_notice``: the one warning of a turn when a request nearly fills the window,
  which says a larger window is needed when the fixed prompt alone takes most of it.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from zcoder.conversation import Message

__all__ = [
    "DEFAULT_NUM_CTX",
    "UNCALIBRATED",
    "Calibration",
    "Window",
    "context_notice",
    "decide_window",
    "estimate_tokens",
]

# Ollama's own default context is 2-4k tokens and it silently drops the start of a longer
# prompt; our system prompt and tools alone take much of that.
DEFAULT_NUM_CTX = 16384
_CHARS_PER_TOKEN = 4
# Warn once the prompt reaches this share of the window; the fixed part (system prompt and
# tool schemas) above ``_FIXED_SHARE`` leaves too little room for any conversation.
_NEARLY_FULL = 0.9
_FIXED_SHARE = 0.5
# A reported count far from the estimate is not a tokenizer difference: a server that
# counts only the uncached part of a prompt, or one that cut the prompt to its window.
_RATIO_BOUNDS = (0.5, 3.0)
_SAMPLES = 8
# Before any count arrived: four characters a token ran 12-15 % low against SmolLM2's
# tokenizer on zcoder's own prompt (1,754 estimated for 2,085 real), so the first request
# of a model is judged as if it were that much larger rather than let overflow unwarned.
UNCALIBRATED = 1.15


@attrs.frozen
class Window:
    """The window of a turn: ``tokens``, and whether the server's report set it."""

    tokens: int
    by_server: bool = False


def decide_window(configured: int | None, reported: int | None) -> Window:
    """The smaller of the configured (or default) window and the server's report."""
    wanted = configured or DEFAULT_NUM_CTX
    if reported is not None and 0 < reported < wanted:
        return Window(reported, by_server=True)
    return Window(wanted)


def estimate_tokens(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> int:
    """A rough prompt size (about four characters a token), before calibration."""
    chars = sum(len(m.content) + len(m.thinking) for m in messages)
    chars += sum(
        len(json.dumps(dict(c.arguments), default=str)) + len(c.name)
        for m in messages
        for c in m.tool_calls
    )
    chars += len(json.dumps(list(tools)))
    return chars // _CHARS_PER_TOKEN


@attrs.define
class Calibration:
    """Reported/estimated prompt tokens over the last few plausible samples, per model."""

    _samples: deque[tuple[int, int]] = attrs.field(factory=lambda: deque(maxlen=_SAMPLES))

    def observe(self, estimate: int, reported: int) -> None:
        """Learn from one request; implausible pairs (see ``_RATIO_BOUNDS``) are ignored."""
        if estimate <= 0 or reported <= 0:
            return
        low, high = _RATIO_BOUNDS
        if low <= reported / estimate <= high:
            self._samples.append((estimate, reported))

    @property
    def ratio(self) -> float:
        """Real tokens per estimated token; ``UNCALIBRATED`` until a sample arrived."""
        estimated = sum(e for e, _ in self._samples)
        if not estimated:
            return UNCALIBRATED
        low, high = _RATIO_BOUNDS
        return min(high, max(low, sum(r for _, r in self._samples) / estimated))

    def tokens(self, estimate: int) -> int:
        """The estimate, corrected."""
        return round(estimate * self.ratio)


def context_notice(
    prompt_tokens: int, fixed_tokens: int, window: Window, server_kind: str
) -> str | None:
    """The warning for a request of ``prompt_tokens`` (of which the system prompt and tool
    schemas take ``fixed_tokens``) in ``window``, or None while it fits comfortably."""
    size = window.tokens
    if prompt_tokens < size * _NEARLY_FULL:
        return None
    if fixed_tokens >= size * _FIXED_SHARE:
        where = (
            f"{server_kind} runs this model with a {size}-token window: start the model "
            "with a larger context, or use a model with a longer one"
            if window.by_server
            else "raise --context-window (agents need 32768 or more for real work)"
        )
        return (
            f"The system prompt and tool schemas alone take about {fixed_tokens} of the "
            f"{size}-token context window, leaving too little room for the conversation; "
            f"a larger window is needed: {where}."
        )
    fix = (
        "Start a new session"
        if window.by_server
        else "Start a new session, or raise --context-window"
    )
    verb = "exceeds" if prompt_tokens > size else "nearly fills"
    return (
        f"The conversation (about {prompt_tokens} tokens) {verb} the context window "
        f"({size} tokens): the model may lose its beginning. {fix}."
    )
