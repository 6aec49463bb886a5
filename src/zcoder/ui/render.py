"""Transcript entries to styled fragments, one look per role. Pure.

Roles stay distinct without colour (``NO_COLOR``): each has its own marker glyph. Long
tool output is summarised, diffs are cut to a screenful, and all untrusted text goes
through ``visible``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

from zcoder.conversation import ToolResult, TranscriptEvent
from zcoder.live import ToolState, ToolUpdate
from zcoder.ui.markdown import render_markdown
from zcoder.ui.text import one_line, shorten, visible, visible_text
from zcoder.ui.wrap import usable_hang, wrap_fragments, wrap_hanging, wrap_line

__all__ = [
    "MAX_DIFF_LINES",
    "MAX_OUTPUT_LINES",
    "MAX_TOOL_TEXT_LINES",
    "TOOL_MARKS",
    "indent",
    "list_hang",
    "render_block",
    "render_diff",
    "render_event",
    "render_notice",
    "render_prose",
    "render_thinking_fold",
    "render_thinking_tail",
    "render_tool",
    "render_user",
]

MAX_DIFF_LINES = 40
_FENCE = "class:md.fence"  # code lines: left whole
_BULLET = "class:md.bullet"  # a list item's marker: its rows go under the text after it
_RELAY_MARK = "⇄ "
MAX_TOOL_TEXT_LINES = 6
MAX_OUTPUT_LINES = 4
# How a card names its state when the state's own name would not read well; the summary
# then follows as the reason ("not delivered: beta is paused").
_STATE_WORDS: dict[ToolState, str] = {"undelivered": "not delivered"}
TOOL_MARKS: dict[ToolState, tuple[str, str]] = {
    "pending": ("○", "class:tool.pending"),
    "running": ("◐", "class:tool.running"),
    "completed": ("✓", "class:tool.ok"),
    "delivered": ("✓", "class:tool.ok"),
    "failed": ("✗", "class:tool.failed"),
    "undelivered": ("✗", "class:tool.undelivered"),
    "denied": ("⊘", "class:tool.denied"),
    "interrupted": ("■", "class:tool.interrupted"),
}


def _count(n: int, noun: str) -> str:
    """``1 earlier line``, ``2 earlier lines``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def indent(fragments: StyleAndTextTuples, prefix: str, style: str = "") -> StyleAndTextTuples:
    """Put ``prefix`` before every line of ``fragments`` (which end with a newline)."""
    out: StyleAndTextTuples = [(style, prefix)]
    for frag_style, text, *_ in fragments:
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                out.append((frag_style, "\n"))
                out.append((style, prefix))
            if part:
                out.append((frag_style, part))
    if out and out[-1] == (style, prefix):
        out.pop()
    return out


def render_user(text: str, *, queued: bool = False, width: int = 100) -> StyleAndTextTuples:
    """A user prompt: a blank line, then ``›`` (``⧗`` while queued) and the text,
    word-wrapped under itself."""
    label = "⧗ " if queued else "› "
    rows = wrap_fragments(visible(text.rstrip("\n"), "class:user"), width - 2)
    body = indent(rows or [("", "\n")], "  ")
    return [("", "\n"), ("class:user.mark", label), *body[1:]]


def render_prose(text: str, width: int) -> StyleAndTextTuples:
    """Assistant Markdown, word-wrapped at ``width`` (code lines are left whole)."""
    return wrap_fragments(render_markdown(text), width, keep_style=_FENCE, hang_style=_BULLET)


def render_diff(diff: str, max_lines: int = MAX_DIFF_LINES) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    lines = diff.replace("\r\n", "\n").rstrip("\n").split("\n")
    for line in lines[:max_lines]:
        if line.startswith(("+++", "---")):
            style = "class:diff.file"
        elif line.startswith("+"):
            style = "class:diff.add"
        elif line.startswith("-"):
            style = "class:diff.del"
        elif line.startswith("@@"):
            style = "class:diff.hunk"
        else:
            style = "class:diff.context"
        out.extend(visible(line, style))
        out.append(("", "\n"))
    if len(lines) > max_lines:
        out.append(("class:dim", f"… {_count(len(lines) - max_lines, 'more diff line')}\n"))
    return out


def render_tool(update: ToolUpdate, *, width: int = 100) -> StyleAndTextTuples:
    """A tool card: mark, name, target, state and the one-line summary (and a diff)."""
    mark, style = TOOL_MARKS[update.state]
    target = shorten(one_line(update.target), max(width - len(update.name) - 20, 20))
    out: StyleAndTextTuples = [
        (style, f"{mark} "),
        ("class:tool.name", update.name),
        ("class:tool.target", f" {target}" if target else ""),
        (style, f"  {_STATE_WORDS.get(update.state, update.state)}"),
    ]
    if update.summary:
        summary = one_line(update.summary)
        used = sum(get_cwidth(text) for _, text, *_ in out)
        joiner, summary_style = " · ", "class:tool.summary"
        if update.state in _STATE_WORDS:  # the summary is the reason: not dimmed
            out.append((style, ":"))
            joiner, summary_style = " ", "class:tool.reason"
        room = max(width - 4, 20)
        if used + 3 + get_cwidth(summary) <= width:
            out.append((summary_style, joiner + summary))
        elif update.state in _STATE_WORDS:  # a reason is read whole: rows of its own
            out.extend((summary_style, f"\n    {row}") for _, row in wrap_line(summary, room))
        else:  # a row of its own, rather than one the terminal cuts in mid-word
            out.append((summary_style, "\n    " + shorten(summary, room)))
    out.append(("", "\n"))
    if update.output.strip() and update.state in ("completed", "failed"):
        out.extend(_output_preview(update.output, width))
    if update.diff and update.state == "completed":
        out.extend(indent(render_diff(update.diff), "    "))
    return out


def _output_preview(output: str, width: int) -> StyleAndTextTuples:
    """The last few lines of a tool's output, dim, under its card."""
    lines = [line for line in output.replace("\r\n", "\n").split("\n") if line.strip()]
    shown = lines[-MAX_OUTPUT_LINES:]
    out: StyleAndTextTuples = []
    if len(lines) > len(shown):
        out.append(("class:dim", f"  ⎿ … {_count(len(lines) - len(shown), 'earlier line')}\n"))
    for n, line in enumerate(shown):
        lead = "  ⎿ " if n == 0 and not out else "    "
        out.append(("class:tool.summary", lead))
        out.extend(visible(shorten(line, max(width - 6, 20)), "class:tool.summary"))
        out.append(("", "\n"))
    return out


def render_thinking_fold(thinking: str, width: int = 100) -> StyleAndTextTuples:
    """Finished thinking, folded to one dim line (one row: the gist is cut to fit)."""
    words = len(thinking.split())
    head = f"  ∴ thought ({words} word{'' if words == 1 else 's'}): "
    gist = shorten(one_line(thinking), max(width - len(head) - 1, 10))
    return [("class:thinking", f"{head}{gist}\n")]


def render_thinking_tail(thinking: str, width: int = 100, rows: int = 2) -> StyleAndTextTuples:
    """The last ``rows`` rows of thinking as it streams, word-wrapped under ``∴``."""
    room = max(width - 4, 10)
    recent = thinking[-rows * room * 2 :]
    words = recent.split()
    if len(recent) < len(thinking) and words and not recent[0].isspace():
        words = words[1:]  # the cut fell inside a word
    shown = wrap_line(visible_text(" ".join(words)), room)[-rows:]
    out: StyleAndTextTuples = []
    for n, (_, row) in enumerate(shown):
        out.append(("class:thinking", f"{'    ' if n else '  ∴ '}{row}\n"))
    return out


def _tool_text(text: str, width: int = 100) -> StyleAndTextTuples:
    lines = text.rstrip("\n").split("\n")
    if not text.strip():
        return []
    body: StyleAndTextTuples = []
    for line in lines[:MAX_TOOL_TEXT_LINES]:  # one row each, under the card
        body.extend(visible(shorten(line, max(width - 4, 20)), "class:tool.summary"))
        body.append(("", "\n"))
    if len(lines) > MAX_TOOL_TEXT_LINES:
        body.append(("class:dim", f"… {_count(len(lines) - MAX_TOOL_TEXT_LINES, 'more line')}\n"))
    return indent(body, "    ")


def _relay_header(meta: Mapping[str, str]) -> str:
    project = one_line(meta.get("project", "?"))
    pid = one_line(meta.get("pid", "?"))
    workspace = one_line(meta.get("workspace", "?"))
    flag = "" if meta.get("verified", "yes") == "yes" else " [unverified sender]"
    return f"relayed from {project} (pid {pid}, {workspace}){flag}"


def _tool_state(value: str) -> ToolState:
    for state in TOOL_MARKS:
        if state == value:
            return state
    return "completed"


def _receipt_body(text: str, changed: bool, width: int) -> StyleAndTextTuples:
    """A receipt's answer, rendered as Markdown like the assistant's (it is a model's
    answer too); its last line, when ``changed``, lists paths: shown as written."""
    text = text.rstrip("\n")
    plain = ""
    if changed:
        text, _, plain = text.rpartition("\n")
    out: StyleAndTextTuples = [
        (style if style.startswith("class:") else f"class:relay.text{style}", part)
        for style, part, *_ in (render_markdown(text) if text.strip() else [])
    ]
    if plain:
        out.extend([*visible(plain, "class:relay.text"), ("", "\n")])
    return wrap_fragments(out, width, keep_style=_FENCE, hang_style=_BULLET)


def render_event(event: TranscriptEvent, *, width: int = 100) -> StyleAndTextTuples:
    """One finished transcript entry, ending with a newline."""
    meta = event.meta
    if event.role == "user":
        return render_user(event.text, width=width)
    if event.role == "assistant":
        body = render_prose(event.text, width - 2)
        if meta.get("partial") == "yes":
            body.append(("class:dim", "(stopped)\n"))
        return [("class:assistant.mark", "● "), *indent(body, "  ")[1:]]
    if event.role == "tool":
        one = "\n" not in event.text.strip()
        update = ToolUpdate(
            call_key="",
            name=meta.get("name", "tool"),
            target=meta.get("target", ""),
            state=_tool_state(meta.get("state", "completed")),
            result=ToolResult("", summary=event.text if one else "", diff=meta.get("diff", "")),
        )
        return [*render_tool(update, width=width), *([] if one else _tool_text(event.text, width))]
    if event.role == "relay" and meta.get("receipt"):  # a receiver's report on our message
        said = _receipt_body(event.text, bool(meta.get("changed")), width - 4)
        head = one_line(meta.get("headline", f"{_RELAY_MARK}receipt"))
        mark = _RELAY_MARK if head.startswith(_RELAY_MARK) else ""  # drawn as it was saved
        return [
            *_marked(mark, [("class:relay", head.removeprefix(mark))], "class:relay", width),
            *(indent(said, "  │ ", "class:relay") if event.text.strip() else []),
        ]
    if event.role == "relay":
        said = wrap_fragments(visible(event.text.rstrip("\n"), "class:relay.text"), width - 4)
        return [
            ("", "\n"),
            *_marked(_RELAY_MARK, [("class:relay", _relay_header(meta))], "class:relay", width),
            *indent(said, "  │ ", "class:relay"),
        ]
    return render_notice(event.text, "error" if event.role == "error" else "system", width)


# A list item's marker, for ``list_hang``: a number (``  3. ``, ``*  1. `` in /sessions) or a
# command and its arguments before a gap of two or more blanks (``/agents pause   refuse``).
_ITEM = re.compile(r"[* ]*\d+\. +(?=\S)|/\S+(?: \S+)*? {2,}(?=\S)")


def list_hang(line: str) -> int:
    """How far a list line's continuation rows go in: under the text after its number or
    command, or 0 (not a list item)."""
    item = _ITEM.match(line)
    return get_cwidth(item.group()) if item else 0


def render_block(
    title: str, lines: Sequence[str], width: int = 100, *, hang: int | None = None
) -> StyleAndTextTuples:
    """A titled list (``/help``, ``/sessions``...): each line word-wrapped and indented;
    its continuation rows ``hang`` columns further in (under a table's second column), by
    default under the text after the line's number or command (``list_hang``)."""
    out = render_notice(title, "system", width)
    room = max(width - 4, 10)
    for line in lines:
        text = visible_text(line)
        at = list_hang(text) if hang is None else hang
        for n, (_, row) in enumerate(wrap_hanging(text, room, at)):
            lead = 4 + (at if n and usable_hang(room, at) else 0)
            out.append(("class:system", f"{' ' * lead}{row}\n"))
    return out


def _marked(
    mark: str, fragments: StyleAndTextTuples, style: str, width: int, glue: str = ""
) -> StyleAndTextTuples:
    """``mark`` (in ``style``), then ``fragments`` word-wrapped, their continuation rows
    under the text after the mark."""
    pad = " " * get_cwidth(mark)
    body = wrap_fragments(fragments, max(width - len(pad), 1), glue=glue)
    return [(style, mark), *indent(body, pad)[1:]] if mark else body


def render_notice(text: str, role: str, width: int = 100) -> StyleAndTextTuples:
    """A notice (``system``) or an error line, word-wrapped under its marker: a hint such as
    `ollama serve` at the end of a long line must not be cut in the middle of a word."""
    style = f"class:{role}"
    mark = "✗ " if role == "error" else "· "
    return _marked(mark, visible(text.rstrip("\n"), style), style, width, glue="`")
