"""The approval line: the app's ``Approver``, drawn above the input.

A question must be answered by a key pressed *for it*. So a key counts only when the
question has been on screen for the guard time and the user paused as long before pressing
it: a typing burst that runs into a new question (``...any`` hitting ``a``) never answers,
and neither does an Escape still waiting for its timeout. Denying needs no pause (it is
always safe): Escape and Ctrl-C deny at once. The guard time is ``GUARD`` (300 ms) unless
the app passes the configured one (``ZCODER_APPROVAL_GUARD_MS``; 0 still requires the
question to have been drawn).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

from zcoder.approval.questions import Answer, ApprovalRequest, question_head
from zcoder.config import DEFAULT_APPROVAL_GUARD_MS
from zcoder.ui.render import indent
from zcoder.ui.text import visible
from zcoder.ui.wrap import fit, wrap_fragments, wrap_line

__all__ = ["GUARD", "ApprovalLine", "count_rows", "full_text"]

GUARD = DEFAULT_APPROVAL_GUARD_MS / 1000  # seconds
_CHOICE_TEXT: dict[str, str] = {
    "y": "yes, once",
    "a": "yes, and allow all commands in this conversation",
    "n": "no",
}
# ``a`` where it grants nothing (a relayed turn): the spec's rule, said where it is pressed.
_A_ONCE = "yes, this command only (a relayed request gets no grant)"
_ANSWERS: dict[str, Answer] = {"y": "y", "a": "a", "n": "n"}
QUIT_LATER = "c-d"  # Ctrl-D pressed while the question is open


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
        print_full: Callable[[StyleAndTextTuples], None] | None = None,
        guard: float = GUARD,
    ) -> None:
        if guard < 0:
            raise ValueError(f"the approval guard is {guard} s; it must be 0 or more")
        self._guard = guard
        self._schedule = schedule
        self._print_full = print_full
        self._printed = False
        self._on_change = on_change
        self._clock = clock
        self.request: ApprovalRequest | None = None
        self._shown_at: float | None = None
        self._last_key = float("-inf")
        self._prev_key = float("-inf")
        self._answer: Answer | None = None
        self._done: trio.Event | None = None
        self.ignored = 0
        self.unoffered = ""

    @property
    def is_open(self) -> bool:
        return self.request is not None and self._answer is None

    @property
    def shown(self) -> bool:
        """Whether the open question has been drawn (its guard time is running)."""
        return self._shown_at is not None

    async def ask(self, request: ApprovalRequest) -> Answer:
        if self.request is not None:
            raise RuntimeError("an approval question is already open")
        self.request, self._answer, self._shown_at, self.ignored = request, None, None, 0
        self.unoffered = ""
        self._printed = False
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
        if key == "c-d":  # the keys are the question's: say so rather than do nothing
            self.unoffered = QUIT_LATER
            self._on_change()
            return False
        answer = _ANSWERS.get(key.lower())
        if answer is None:
            return False
        if answer not in request.choices:  # say so: silence looks like a frozen app
            self.unoffered = answer
            self._on_change()
            return False
        now = self._clock()
        settled = self._shown_at is not None and now - self._shown_at >= self._guard
        if answer != "n" and (not settled or now - self._prev_key < self._guard):
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

    def render(self, max_rows: int = 10_000, width: int = 100) -> StyleAndTextTuples:
        """The question in at most ``max_rows`` rows of ``width`` cells. The choices always
        show; a text too long to fit keeps its first and last rows around a marker, and is
        printed whole above the app once, so what is approved can always be read."""
        request = self.request
        if request is None or self._answer is not None:
            return []
        head = _head(request, width)
        choices = _choices(request, self.ignored, self.unoffered, width)
        room = max_rows - count_rows(head, width) - count_rows(choices, width)
        rows = _text_rows(request.text, width)
        if len(rows) <= max(room, 3):  # hiding fewer rows than the marker takes helps nobody
            return [*head, *[f for row in rows for f in row], *choices]
        if self._print_full is not None and not self._printed:
            self._printed = True
            self._print_full(full_text(request, width))
        top = max(room - 1, 2) // 2
        bottom = max(max(room - 1, 2) - top, 1)
        noun = _NOUNS.get(request.kind, "command")
        hidden = len(rows) - top - bottom
        unit = "lines" if len(rows) == request.text.count("\n") + 1 else "rows"
        where = "printed above" if self._print_full is not None else "not shown"
        marker: StyleAndTextTuples = [
            ("class:approval.frame", "│ "),
            ("class:approval.hint", f"⋮ {hidden} more {unit}; the whole {noun} is {where}\n"),
        ]
        kept = [*rows[:top], marker, *rows[-bottom:]]
        return [*head, *[f for row in kept for f in row], *choices]


_NOUNS = {"send": "message", "tool": "call"}


def count_rows(fragments: StyleAndTextTuples, width: int) -> int:
    """Screen rows ``fragments`` take in a window ``width`` cells wide that wraps lines."""
    lines = "".join(t for _, t, *_ in fragments).split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return sum(max(1, -(-get_cwidth(line) // max(width, 1))) for line in lines)


def _text_rows(text: str, width: int) -> list[StyleAndTextTuples]:
    """The question's text as framed rows: a long line continues on rows of its own, cut
    at the width exactly (a command is not prose: no word wrapping)."""
    room = max(width - 2, 1)
    rows: list[StyleAndTextTuples] = []
    for line in text.split("\n"):
        row: StyleAndTextTuples = [("class:approval.frame", "│ ")]
        used = 0
        for style, part, *_ in visible(line, "class:approval.text"):
            while part:
                n = fit(part, room - used) or (0 if used else 1)  # always progress
                if n:
                    row.append((style, part[:n]))
                    used, part = used + get_cwidth(part[:n]), part[n:]
                if part:
                    rows.append([*row, ("", "\n")])
                    row, used = [("class:approval.frame", "│ ")], 0
        rows.append([*row, ("", "\n")])
    return rows


def full_text(request: ApprovalRequest, width: int = 100) -> StyleAndTextTuples:
    """The whole text of a question too long for the screen, for the scrollback."""
    noun = _NOUNS.get(request.kind, "command")
    lines = request.text.count("\n") + 1
    head = f"The whole {noun} of the question below ({lines} lines):\n"
    body = [f for row in _text_rows(request.text, width) for f in row]
    return [("class:approval.frame", "╭ "), ("class:approval", head), *body]


def _head(request: ApprovalRequest, width: int = 100) -> StyleAndTextTuples:
    head = question_head(request)
    # Word-wrapped inside the frame: an instance id or a path is not cut in two.
    out: StyleAndTextTuples = []
    for n, (_, row) in enumerate(wrap_line(head, max(width - 2, 10))):
        out.append(("class:approval.frame", "│ " if n else "╭ "))
        out.append(("class:approval", row + "\n"))
    return out


def _choices(
    request: ApprovalRequest, ignored: int, unoffered: str = "", width: int = 10_000
) -> StyleAndTextTuples:
    """The keys, word-wrapped under the frame's corner (the last row has no newline)."""
    out: StyleAndTextTuples = []
    for choice in request.choices:
        said = _A_ONCE if choice == "a" and not request.a_grants else _CHOICE_TEXT[choice]
        out.append(("class:approval.keys", f"[{choice}]"))
        out.append(("", f" {said}   "))
    out.append(("class:approval.hint", "(Esc\u00a0=\u00a0no)"))  # kept on one row
    if unoffered == QUIT_LATER:
        out.append(("class:approval.hint", "  · answer first: Ctrl-D quits after the question"))
    elif unoffered:
        out.append(("class:approval.hint", f"  · [{unoffered}] is not offered here"))
    elif ignored:
        out.append(("class:approval.hint", "  · keys typed before the question are ignored"))
    rows = indent(wrap_fragments(out, max(width - 2, 10)), "  ")
    while rows and rows[-1][1] in ("\n", "  "):  # the input line follows directly
        rows.pop()
    return [("class:approval.frame", "╰ "), *rows[1:]]
