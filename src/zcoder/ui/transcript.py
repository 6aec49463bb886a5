"""The transcript: live turn events in, finished lines out to the scrollback.

What is finished is printed above the app (``print_above``) and so lives in the terminal's
own scrollback: user prompts, assistant paragraphs as soon as a blank line closes them,
tool cards once their state is final, notices and errors. What is still moving is drawn by
the app from ``render_live``: the paragraph being streamed, the thinking tail, running tool
cards and queued prompts. No prompt_toolkit application here; pure state.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

from zcoder.conversation import ToolResult, TranscriptEvent
from zcoder.live import Entry, LiveEvent, TextDelta, ThinkingDelta, ToolUpdate
from zcoder.ui.markdown import split_blocks
from zcoder.ui.render import (
    indent,
    render_event,
    render_prose,
    render_thinking_fold,
    render_thinking_tail,
    render_tool,
    render_user,
)
from zcoder.ui.text import visible_text
from zcoder.ui.wrap import TailWrap, split_lines

__all__ = ["TranscriptView"]

_OPEN_STATES = ("pending", "running")


class TranscriptView:
    def __init__(
        self,
        print_above: Callable[[StyleAndTextTuples], None],
        width: Callable[[], int] = lambda: 100,
    ) -> None:
        self._print = print_above
        self._width = width
        self.streamed = ""  # raw text of the assistant message being streamed
        self._committed = 0  # how much of it is already in the scrollback
        self.thinking = ""
        self.tools: dict[str, ToolUpdate] = {}
        self._printed_tools: set[tuple[str, str]] = set()
        self.queued: list[str] = []
        self._wrap = TailWrap()
        # Notices that came while an answer streamed (a relay's withdrawal, a receipt):
        # printed once the answer is, never between two of its paragraphs.
        self._held: list[TranscriptEvent] = []

    def apply(self, event: LiveEvent) -> None:
        if isinstance(event, TextDelta):
            self._fold_thinking()
            self.streamed += event.text
            if "\n" in event.text:  # a block can only end at a line break
                self._commit_finished_blocks()
        elif isinstance(event, ThinkingDelta):
            self.thinking += event.text
        elif isinstance(event, ToolUpdate):
            self._tool(event)
        elif isinstance(event, Entry):
            self.show(event.event)

    def show(self, event: TranscriptEvent) -> None:
        """A finished entry: from the agent, a notice of the app, or replayed history."""
        if event.role == "assistant":
            self._fold_thinking()
            self._finish_assistant(event)
            return
        if event.role == "tool":
            key = (dict(event.meta).get("name", ""), dict(event.meta).get("target", ""))
            if key in self._printed_tools:
                return  # its card was already printed from the live updates
        if self.streamed.strip() and event.role in ("system", "relay"):
            self._held.append(event)
            return
        if self.streamed.strip() and event.role == "error":
            self._cut_off()  # the answer it cut comes first, marked, then why
        self._print(render_event(event, width=self._width()))

    def notice(self, text: str, role: str = "system") -> None:
        self.show(TranscriptEvent(role="error" if role == "error" else "system", text=text))

    def end_turn(self) -> None:
        """The turn is over: flush whatever is left; running cards are interrupted."""
        self._fold_thinking()
        self._print_rest()
        for update in list(self.tools.values()):
            self._tool(attrs.evolve(update, state="interrupted", result=ToolResult("")))
        self._printed_tools.clear()
        self._streamed_out()

    def _cut_off(self) -> None:
        """An error ended the answer being streamed: what streamed, then ``(cut off)``."""
        self._print_rest("(cut off)")
        self._streamed_out()

    def _print_rest(self, mark: str = "") -> None:
        """What streamed and is not printed yet, then ``mark``, dim, under it."""
        rest = self.streamed[self._committed :]
        if rest.strip():
            self._print_assistant(rest)
        if mark:
            self._print([("class:dim", f"  {mark}\n")])

    def _streamed_out(self) -> None:
        """The streamed answer is all printed: the notices held back meanwhile follow."""
        self.streamed, self._committed = "", 0
        self._print_held()

    def _print_held(self) -> None:
        held, self._held = self._held, []
        for event in held:
            self._print(render_event(event, width=self._width()))

    def _tool(self, update: ToolUpdate) -> None:
        self._fold_thinking()
        if update.state in _OPEN_STATES:
            self.tools[update.call_key] = update
            return
        self.tools.pop(update.call_key, None)
        self._printed_tools.add((update.name, update.target))
        self._print(render_tool(update, width=self._width()))

    def _fold_thinking(self) -> None:
        if self.thinking.strip():
            self._print(render_thinking_fold(self.thinking, self._width()))
        self.thinking = ""

    def _commit_finished_blocks(self) -> None:
        finished, _ = split_blocks(self.streamed[self._committed :])
        if finished:
            self._print_assistant(finished)
            self._committed += len(finished)

    def _print_assistant(self, text: str) -> None:
        if not text.strip():
            return
        first = self._committed == 0 or not self.streamed[: self._committed].strip()
        if first:
            text = text.lstrip("\n")
        body = indent(render_prose(text, self._width() - 2), "  ")
        if first:
            body = [("class:assistant.mark", "● "), *body[1:]]
        self._print(body)

    def _finish_assistant(self, event: TranscriptEvent) -> None:
        if self.streamed and self.streamed.strip() == event.text.strip():
            self._print_rest("(stopped)" if dict(event.meta).get("partial") == "yes" else "")
        else:
            self._print(render_event(event, width=self._width()))
        self._streamed_out()

    def render_live(self, max_lines: int) -> StyleAndTextTuples:
        """The moving part of the transcript, cut to its last ``max_lines`` screen lines."""
        out: StyleAndTextTuples = []
        if self.thinking.strip() and not self.streamed:
            # Two screen rows of it at most: thinking is a glimpse, not the answer.
            out.extend(render_thinking_tail(self.thinking, self._width()))
        rest = self.streamed[self._committed :]
        if rest.strip():
            first = not self.streamed[: self._committed].strip()
            text = visible_text(rest.lstrip("\n").rstrip(" "))
            rows = self._wrap.rows(text, self._width() - 2)
            shown = rows[-max_lines:]
            mark = "● " if first and len(shown) == len(rows) else "  "
            for n, row in enumerate(shown):
                out.append(("class:assistant.mark", mark) if n == 0 else ("", "  "))
                out.append(("", row + "\n"))
        for update in self.tools.values():
            out.extend(render_tool(update, width=self._width()))
        for text in self.queued:
            out.extend(render_user(text, queued=True, width=self._width())[1:])
        return _tail(out, max_lines, self._width())


def _tail(fragments: StyleAndTextTuples, max_lines: int, width: int) -> StyleAndTextTuples:
    """The last ``max_lines`` screen lines of ``fragments`` (wrapped at ``width``)."""
    lines = split_lines(fragments)
    width = max(width, 1)
    room = max_lines
    keep: list[StyleAndTextTuples] = []
    for line in reversed(lines):
        rows = max(1, -(-sum(get_cwidth(t) for _, t, *_ in line) // width))
        if rows > room:
            if room > 0:
                keep.append(_last_cells(line, room * width))
            break
        keep.append(line)
        room -= rows
    out: StyleAndTextTuples = []
    for n, line in enumerate(reversed(keep)):
        if n:
            out.append(("", "\n"))
        out.extend(line)
    return out


def _last_cells(line: StyleAndTextTuples, cells: int) -> StyleAndTextTuples:
    """The end of ``line`` that fits in ``cells`` columns."""
    out: StyleAndTextTuples = []
    for style, text, *_ in reversed(line):
        if cells <= 0:
            break
        part = text[-cells:]
        out.append((style, part))
        cells -= get_cwidth(part)
    return list(reversed(out))
