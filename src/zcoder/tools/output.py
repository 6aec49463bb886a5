"""Output caps: keep the head and the tail of long text, mark what was left out.

The model needs the start of an output (what ran, the first error) and its end (the summary,
the exit status), rarely the middle. ``OutputCollector`` applies the same rule while a
command is still writing, so unbounded output never sits in memory.
"""

from __future__ import annotations

import codecs
import difflib
from collections import deque

__all__ = ["OutputCollector", "cap_text", "omission_marker", "short_diff"]

_DIFF_LINES = 200


def omission_marker(omitted: int) -> str:
    return f"\n[... {omitted} characters omitted ...]\n"


def _split(total: int, cap: int) -> tuple[int, int]:
    """How many leading and trailing characters of ``total`` fit in ``cap`` with a marker."""
    keep = max(cap - len(omission_marker(total)), 0)
    # A smaller count may print narrower, leaving room for a few more kept characters.
    while keep + 1 < total and keep + 1 + len(omission_marker(total - keep - 1)) <= cap:
        keep += 1
    head = keep // 2 + keep % 2
    return head, keep - head


def cap_text(text: str, cap: int) -> str:
    """``text`` itself when it fits in ``cap`` characters, else head + marker + tail."""
    if len(text) <= cap:
        return text
    head, tail = _split(len(text), cap)
    omitted = len(text) - head - tail
    return text[:head] + omission_marker(omitted) + (text[len(text) - tail :] if tail else "")


class OutputCollector:
    """Collects decoded output, remembering at most about ``2 * cap`` characters."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._total = 0

    @property
    def total(self) -> int:
        """Characters seen so far."""
        return self._total

    def feed_bytes(self, data: bytes | bytearray) -> None:
        self.feed(self._decoder.decode(data))

    def feed(self, text: str) -> None:
        if not text:
            return
        self._total += len(text)
        room = self._cap - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(text[:room])
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            self._trim_tail()

    def _trim_tail(self) -> None:
        while self._tail and self._tail_len - len(self._tail[0]) >= self._cap:
            self._tail_len -= len(self._tail.popleft())
        excess = self._tail_len - self._cap
        if excess > 0:
            self._tail[0] = self._tail[0][excess:]
            self._tail_len -= excess

    def text(self) -> str:
        """Everything seen, capped exactly as ``cap_text`` would cap it."""
        self.feed(self._decoder.decode(b"", final=True))
        head_text = "".join(self._head)
        tail_text = "".join(self._tail)
        if self._head_len + self._tail_len == self._total:
            return cap_text(head_text + tail_text, self._cap)
        head, tail = _split(self._total, self._cap)
        omitted = self._total - head - tail
        kept_tail = tail_text[len(tail_text) - tail :] if tail else ""
        return head_text[:head] + omission_marker(omitted) + kept_tail


def short_diff(name: str, old: str | None, new: str | None, max_lines: int = _DIFF_LINES) -> str:
    """A unified diff for the UI, cut after ``max_lines`` lines; None = no such file."""
    lines = list(
        difflib.unified_diff(
            (old or "").splitlines(),
            (new or "").splitlines(),
            fromfile=f"a/{name}" if old is not None else "/dev/null",
            tofile=f"b/{name}" if new is not None else "/dev/null",
            lineterm="",
        )
    )
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], f"[... {len(lines) - max_lines} more diff lines ...]"]
    return "\n".join(lines)
