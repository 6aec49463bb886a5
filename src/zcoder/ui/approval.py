"""The approval line: the app's ``Approver``, drawn above the input.

A question must be answered by a key pressed *for it*. So a key counts only when the
question has been on screen for ``GUARD`` seconds and the user paused for ``GUARD`` before
pressing it: a typing burst that runs into a new question (``...any`` hitting ``a``) never
answers, and neither does an Escape still waiting for its timeout. Denying needs no pause
(it is always safe): Escape and Ctrl-C deny at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio
from prompt_toolkit.formatted_text import StyleAndTextTuples

from zcoder.approval import Answer, ApprovalRequest
from zcoder.ui.text import one_line, visible

__all__ = ["GUARD", "ApprovalLine"]

GUARD = 0.3
_CHOICE_TEXT: dict[str, str] = {
    "y": "yes, once",
    "a": "yes, and allow all commands in this conversation",
    "n": "no",
}
_ANSWERS: dict[str, Answer] = {"y": "y", "a": "a", "n": "n"}


class ApprovalLine:
    """Holds at most one open question; ``ask`` is called from Trio by the agent.

    ``schedule`` runs a callable on the Trio side (``trio_token.run_sync_soon``): key
    handlers run on the host loop and must not touch Trio objects directly.
    """

    def __init__(
        self,
        schedule: Callable[[Callable[[], None]], object],
        on_change: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._schedule = schedule
        self._on_change = on_change
        self._clock = clock
        self.request: ApprovalRequest | None = None
        self._shown_at: float | None = None
        self._last_key = float("-inf")
        self._prev_key = float("-inf")
        self._answer: Answer | None = None
        self._done: trio.Event | None = None
        self.ignored = 0

    @property
    def is_open(self) -> bool:
        return self.request is not None and self._answer is None

    async def ask(self, request: ApprovalRequest) -> Answer:
        if self.request is not None:
            raise RuntimeError("an approval question is already open")
        self.request, self._answer, self._shown_at, self.ignored = request, None, None, 0
        done = self._done = trio.Event()
        self._on_change()
        try:
            await done.wait()
            return self._answer or "n"
        finally:
            self.request, self._done = None, None
            self._on_change()

    def mark_rendered(self) -> None:
        """Called after each redraw: the guard time starts once the question is visible."""
        if self.request is not None and self._shown_at is None:
            self._shown_at = self._clock()

    def note_key(self) -> None:
        """Called before every key press is handled (any key, question or not)."""
        self._prev_key, self._last_key = self._last_key, self._clock()

    def press(self, key: str) -> bool:
        """A key meant for the question; returns whether it answered it."""
        request = self.request
        if request is None or self._answer is not None:
            return False
        if key == "escape":
            return self._resolve("n")
        answer = _ANSWERS.get(key.lower())
        if answer is None or answer not in request.choices:
            return False
        now = self._clock()
        settled = self._shown_at is not None and now - self._shown_at >= GUARD
        if answer != "n" and (not settled or now - self._prev_key < GUARD):
            self.ignored += 1
            self._on_change()
            return False
        return self._resolve(answer)

    def _resolve(self, answer: Answer) -> bool:
        self._answer = answer
        done = self._done
        if done is not None:
            self._schedule(done.set)
        self._on_change()
        return True

    def render(self) -> StyleAndTextTuples:
        request = self.request
        if request is None or self._answer is not None:
            return []
        return [*_question(request), *_choices(request, self.ignored)]


def _question(request: ApprovalRequest) -> StyleAndTextTuples:
    who = "A relayed request" if request.origin == "relay" else "The model"
    if request.kind == "send":
        head = f"{who} wants to send a message to {one_line(request.target)}:"
    else:
        where = f" in {one_line(request.cwd)}" if request.cwd else ""
        head = f"{who} wants to run this command{where}:"
    out: StyleAndTextTuples = [("class:approval.frame", "╭ "), ("class:approval", head + "\n")]
    for line in request.text.split("\n"):
        out.append(("class:approval.frame", "│ "))
        out.extend(visible(line, "class:approval.text"))
        out.append(("", "\n"))
    return out


def _choices(request: ApprovalRequest, ignored: int) -> StyleAndTextTuples:
    out: StyleAndTextTuples = [("class:approval.frame", "╰ ")]
    for choice in request.choices:
        out.append(("class:approval.keys", f"[{choice}]"))
        out.append(("", f" {_CHOICE_TEXT[choice]}   "))
    out.append(("class:approval.hint", "(Esc = no)"))
    if ignored:
        out.append(("class:approval.hint", "  · keys typed before the question are ignored"))
    return out
