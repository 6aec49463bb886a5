"""The context window and what fills it: the one owner of token sizes (pure, no I/O).

- ``decide_window``: the smaller of what the server reports for the model and what zcoder
  is configured to use (``--context-window``, else ``DEFAULT_NUM_CTX``). For Ollama the
  decided window is also the ``num_ctx`` sent, so the server never runs a larger one.
- ``estimate_tokens``: a rough prompt size, four characters a token plus a little per message.
- ``Calibration``: the server's count wins. The last request the server counted is the
  anchor; a new request is that count plus the estimated change since, scaled by the ratio
  the server's counts showed for such changes. A server whose chat template drops the tool
  schemas (SmolLM2's own) counts 300 tokens where the estimate says 3,000: the anchor
  carries that, and a change of history is still judged in real tokens.
- ``Budget``: the window, the compaction threshold (``--compact-at``) and the output cap; the
  output room of a request and whether a prompt must be compacted first.
- ``overflow_of``: a server's "the prompt does not fit the window" error (llama.cpp, vLLM,
  LM Studio, Ollama), with the sizes it names.
- ``fixed_too_large``: the one-line error when the system prompt and tools alone overflow.

The compaction plan (what to shorten, what to summarise, what to keep) is ``compaction``'s,
which measures with this module.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from zcoder.config import DEFAULT_COMPACT_AT
from zcoder.conversation import Message
from zcoder.errors import ModelError, ModelHTTPError, StreamErrorLine
from zcoder.text.counts import counted

__all__ = [
    "DEFAULT_COMPACT_AT",
    "DEFAULT_NUM_CTX",
    "UNCALIBRATED",
    "Budget",
    "Calibration",
    "Overflow",
    "Window",
    "decide_window",
    "estimate_tokens",
    "fixed_too_large",
    "message_tokens",
    "overflow_in",
    "overflow_of",
    "refused_text",
    "server_text",
    "too_large_text",
]

# Ollama's own default context is 2-4k tokens and it silently drops the start of a longer
# prompt; our system prompt and tools alone take much of that.
DEFAULT_NUM_CTX = 16384
_CHARS_PER_TOKEN = 4
# Every message costs a few tokens of the chat template (role markers, separators).
_MESSAGE_OVERHEAD = 4
# A ratio of real to estimated tokens outside these bounds is not a tokenizer difference.
_RATIO_BOUNDS = (0.5, 3.0)
_SAMPLES = 8
# Changes smaller than this say more about rounding than about the tokenizer.
_MIN_DELTA = 32
# Before any count arrived: four characters a token ran 12-15 % low against SmolLM2's
# tokenizer on zcoder's own prompt (1,754 estimated for 2,085 real), so a model's first
# request is judged as if it were that much larger rather than let overflow unwarned.
UNCALIBRATED = 1.15
# A reply needs some room: below this many tokens (or the output cap, if smaller) a
# request is not worth sending.
MIN_REPLY = 256


@attrs.frozen
class Window:
    """The window of a turn: ``tokens``, and who set it (``by_server``: the server's report;
    ``configured``: ``--context-window``; neither: zcoder's default)."""

    tokens: int
    by_server: bool = False
    configured: bool = False

    @property
    def source(self) -> str:
        if self.by_server:
            return "reported by the server"
        if self.configured:
            return "--context-window"
        return "zcoder's default"


def decide_window(configured: int | None, reported: int | None) -> Window:
    """The smaller of the configured (or default) window and the server's report."""
    wanted = configured or DEFAULT_NUM_CTX
    if reported is not None and 0 < reported < wanted:
        return Window(reported, by_server=True)
    return Window(wanted, configured=configured is not None)


def message_tokens(message: Message) -> int:
    """One message's estimated size (before calibration)."""
    chars = len(message.content) + len(message.thinking)
    chars += sum(
        len(json.dumps(dict(c.arguments), default=str)) + len(c.name) for c in message.tool_calls
    )
    return chars // _CHARS_PER_TOKEN + _MESSAGE_OVERHEAD


def tools_tokens(tools: Sequence[Mapping[str, Any]]) -> int:
    """The tool schemas' estimated size."""
    return len(json.dumps(list(tools))) // _CHARS_PER_TOKEN if tools else 0


def estimate_tokens(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> int:
    """A rough prompt size (about four characters a token), before calibration."""
    return sum(message_tokens(m) for m in messages) + tools_tokens(tools)


@attrs.define
class Calibration:
    """What the server's prompt counts taught about one model's tokens.

    ``anchor`` is the last request the server counted, as (estimate, count); ``ratio`` is
    real tokens per estimated token over recent changes between counted requests.
    """

    _deltas: deque[tuple[int, int]] = attrs.field(factory=lambda: deque(maxlen=_SAMPLES))
    anchor: tuple[int, int] | None = None

    def observe(self, estimate: int, reported: int) -> None:
        """Learn from one request the server counted (``reported`` > 0)."""
        if estimate <= 0 or reported <= 0:
            return
        if self.anchor is not None:
            d_est, d_real = estimate - self.anchor[0], reported - self.anchor[1]
            if abs(d_est) >= _MIN_DELTA and d_est * d_real > 0:
                low, high = _RATIO_BOUNDS
                if low <= d_real / d_est <= high:
                    self._deltas.append((abs(d_est), abs(d_real)))
        self.anchor = (estimate, reported)

    def copy(self) -> Calibration:
        """What it knows now, to go back to (``restore``)."""
        return Calibration(deque(self._deltas, maxlen=_SAMPLES), self.anchor)

    def restore(self, earlier: Calibration) -> None:
        """Forget what was learnt since ``earlier`` was copied."""
        self._deltas, self.anchor = deque(earlier._deltas, maxlen=_SAMPLES), earlier.anchor

    @property
    def calibrated(self) -> bool:
        """Whether the server has counted a request of this model yet."""
        return self.anchor is not None

    @property
    def ratio(self) -> float:
        """Real tokens per estimated token of a change; ``UNCALIBRATED`` until known."""
        estimated = sum(e for e, _ in self._deltas)
        if not estimated:
            return UNCALIBRATED
        low, high = _RATIO_BOUNDS
        return min(high, max(low, sum(r for _, r in self._deltas) / estimated))

    def tokens(self, estimate: int) -> int:
        """The real size of a prompt estimated at ``estimate``: the anchor's count plus the
        change since, or the scaled estimate before any count."""
        if self.anchor is None:
            return round(estimate * self.ratio)
        base_estimate, base_real = self.anchor
        return max(1, round(base_real + (estimate - base_estimate) * self.ratio))

    def part(self, estimate: int) -> int:
        """The real size of one part of a prompt (a message, the history): scaled only."""
        return round(estimate * self.ratio)


@attrs.frozen
class Budget:
    """How a window is spent: compact once a prompt passes ``compact_at`` percent of it,
    and leave the reply room for up to ``output_cap`` tokens."""

    window: Window
    compact_at: int = DEFAULT_COMPACT_AT
    output_cap: int = 4096

    @property
    def threshold(self) -> int:
        return self.window.tokens * self.compact_at // 100

    @property
    def min_reply(self) -> int:
        return min(self.output_cap, MIN_REPLY, self.window.tokens // 8)

    def needs_compaction(self, prompt_tokens: int) -> bool:
        return prompt_tokens > self.threshold

    def fits(self, prompt_tokens: int) -> bool:
        """Whether a prompt of this size leaves a reply its minimum room."""
        return prompt_tokens + self.min_reply <= self.window.tokens

    def reply_room(self, prompt_tokens: int) -> int:
        """The output cap of a request: the configured cap, but never past the window (an
        OpenAI-compatible server refuses a prompt plus ``max_tokens`` over its length),
        with a margin for the estimate of the prompt (measured a few tokens low at times)."""
        margin = max(16, self.window.tokens // 64)
        return max(1, min(self.output_cap, self.window.tokens - prompt_tokens - margin))

    def percent(self, prompt_tokens: int) -> int:
        return min(999, round(100 * prompt_tokens / max(1, self.window.tokens)))


@attrs.frozen
class Overflow:
    """A server's context error: the prompt size and the window it named, where it did."""

    prompt_tokens: int | None = None
    window: int | None = None


# Each server's own wording (the exact bodies are in the tests' fakes):
_OVERFLOW = re.compile(
    r"exceeds the available context size"  # llama.cpp
    r"|maximum context length"  # vLLM, OpenAI, LiteLLM
    r"|context length of only"  # LM Studio: "Trying to keep the first N tokens ..."
    r"|context (?:size|length|window) (?:has been |was )?exceeded"  # LM Studio's MLX engine
    r"|reached context length"  # LM Studio, mid-generation
    r"|exceeds? (?:the )?(?:maximum )?context length"  # Ollama
    r"|prompt (?:is )?too long"  # Ollama, others
    r"|exceed_context_size_error",
    re.IGNORECASE,
)
_PROMPT_SIZE = re.compile(
    r"request \((\d+) tokens\)"  # llama.cpp
    r"|(\d+) in the messages"  # vLLM, older
    r"|request has (\d+) input tokens"  # vLLM, newer
    r"|keep the first (\d+) tokens"  # LM Studio
    r"|prompt \(length (\d+)\)",  # vLLM's decoder prompt
    re.IGNORECASE,
)
_WINDOW_SIZE = re.compile(
    r"available context size \((\d+) tokens\)"
    r"|maximum context length is (\d+)"
    r"|context length of only (\d+)"
    r"|maximum model length of (\d+)",
    re.IGNORECASE,
)


def _first_number(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    if match is None:
        return None
    return next(int(g) for g in match.groups() if g is not None)


def overflow_of(message: str) -> Overflow | None:
    """The sizes a server's context error names, or None when ``message`` is another error."""
    if not _OVERFLOW.search(message) and "maximum model length" not in message.lower():
        return None
    return Overflow(_first_number(_PROMPT_SIZE, message), _first_number(_WINDOW_SIZE, message))


def server_text(exc: ModelError) -> str:
    """What the server said in a failure (its own message for an HTTP error)."""
    return exc.server_message if isinstance(exc, ModelHTTPError) else str(exc)


def overflow_in(exc: ModelError) -> Overflow | None:
    """The sizes a server's refusal of a request as larger than its window names, or
    None when ``exc`` is another failure (an error status, or an error in the stream)."""
    if isinstance(exc, ModelHTTPError | StreamErrorLine):
        return overflow_of(server_text(exc))
    return None


def fixed_too_large(fixed_tokens: int, window: Window, server_kind: str) -> str:
    """The error for a window that the system prompt and tool schemas alone overflow."""
    size = window.tokens
    where = (
        f"{server_kind} runs this model with a {size}-token window: start the model with "
        "a larger context, or use a model with a longer one"
        if window.by_server
        else f"raise --context-window (now {size}; agents need 32768 or more for real work)"
    )
    return (
        f"The system prompt and tool schemas alone take about {fixed_tokens:,} of the "
        f"{size:,}-token context window, leaving no room for the conversation: {where}."
    )


def too_large_text(prompt_tokens: int, window: Window) -> str:
    """The error for a request that no compaction brings inside ``window``."""
    return (
        f"The request (about {counted(prompt_tokens, 'token')}) does not fit the model's "
        f"{window.tokens:,}-token context window, even compacted: the task is too large for "
        "this window; split it, or give the model a larger window."
    )


def refused_text(window: Window, server_kind: str, server_text: str) -> str:
    """The error for a request the server refused as too large a second time; a window
    zcoder only assumed is not called the model's (the server refused inside it)."""
    which = (
        f"the model's {window.tokens:,}-token context window"
        if window.by_server
        else f"the server's context window (zcoder assumed {counted(window.tokens, 'token')}, "
        f"{window.source})"
    )
    return (
        f"The request does not fit {which}, even compacted ({server_kind}: "
        f"{server_text[:200]}): the task is too large for this window; split it, or give the "
        "model a larger window."
    )
