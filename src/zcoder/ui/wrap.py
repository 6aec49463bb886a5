"""Word wrapping for text that keeps growing (the streamed answer). Pure.

Rows already complete never change when more text arrives, so the live area only redraws
its last row per token instead of reflowing the whole screen; ``TailWrap`` remembers where
the complete rows end and wraps only what came after.
"""

from __future__ import annotations

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

__all__ = ["TailWrap", "fit", "split_lines", "wrap_fragments", "wrap_line"]


def fit(text: str, cells: int) -> int:
    """How many characters of ``text`` fit in ``cells`` columns (wide characters count 2)."""
    if text.isascii():
        return max(0, min(len(text), cells))
    used = 0
    for n, ch in enumerate(text):
        used += get_cwidth(ch)
        if used > cells:
            return n
    return len(text)


def _fit(line: str, width: int) -> int:
    """``fit``, but at least one character, so that wrapping always moves on."""
    return max(fit(line, width), 1)


def _cells(line: str) -> int:
    return len(line) if line.isascii() else get_cwidth(line)


def _space_before(line: str, start: int, cut: int, glue: str) -> int:
    """The last space in ``line[start + 1 : cut + 1]`` that is not inside a ``glue`` pair
    (``-1`` if none)."""
    space = line.rfind(" ", start + 1, cut + 1)
    while glue and space > start and line.count(glue, 0, space) % 2:
        space = line.rfind(" ", start + 1, space)
    return space


def wrap_line(line: str, width: int, glue: str = "") -> list[tuple[int, str]]:
    """``line`` broken at spaces (or anywhere in a word longer than ``width``) into rows,
    each with its start offset in ``line``. Spaces between a pair of ``glue`` characters
    (a `command` in backticks) break only when nothing else fits."""
    rows: list[tuple[int, str]] = []
    start = 0
    while _cells(line[start:]) > width:
        cut = start + _fit(line[start:], width)
        space = _space_before(line, start, cut, glue)
        if space <= start:
            space = line.rfind(" ", start + 1, cut + 1)
        end, resume = (space, space + 1) if space > start else (cut, cut)
        while end > start + 1 and line[end - 1] == " ":  # no trailing blanks on a row
            end -= 1
        while resume < len(line) and line[resume] == " " and space > start:  # nor leading
            resume += 1
        rows.append((start, line[start:end]))
        start = resume
    rows.append((start, line[start:]))
    return rows


class TailWrap:
    """Wraps a growing text; rows before the last one are computed once."""

    def __init__(self) -> None:
        self._width = 0
        self._text = ""
        self._stable: list[str] = []  # complete rows
        self._done = 0  # offset where the complete rows end

    def rows(self, text: str, width: int) -> list[str]:
        width = max(width, 1)
        if width != self._width or not text.startswith(self._text[: self._done]):
            self._width, self._stable, self._done = width, [], 0
        self._text = text
        # A row after a break starts past the blanks, as in ``wrap_line``.
        while (
            0 < self._done < len(text) and text[self._done] == " " and text[self._done - 1] != "\n"
        ):
            self._done += 1
        rest = text[self._done :]
        lines = rest.split("\n")
        offset = self._done
        tail: list[str] = []
        for i, line in enumerate(lines):
            wrapped = wrap_line(line, width)
            last = i == len(lines) - 1
            complete = wrapped if not last else wrapped[:-1]
            self._stable.extend(row for _, row in complete)
            if last:
                self._done = offset + wrapped[-1][0]
                tail = [wrapped[-1][1]]
            else:
                offset += len(line) + 1
        return [*self._stable, *tail]


def split_lines(fragments: StyleAndTextTuples) -> list[StyleAndTextTuples]:
    """``fragments`` cut at newlines: one fragment list per line, no trailing empty line."""
    lines: list[StyleAndTextTuples] = [[]]
    for style, text, *_ in fragments:
        for i, part in enumerate(text.split("\n")):
            if i:
                lines.append([])
            if part:
                lines[-1].append((style, part))
    if not lines[-1]:
        lines.pop()
    return lines


def _slice(line: StyleAndTextTuples, start: int, end: int) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    pos = 0
    for style, text, *_ in line:
        a, b = max(start, pos), min(end, pos + len(text))
        if a < b:
            out.append((style, text[a - pos : b - pos]))
        pos += len(text)
    return out


def wrap_fragments(
    fragments: StyleAndTextTuples, width: int, *, keep_style: str = "", glue: str = ""
) -> StyleAndTextTuples:
    """Styled lines word-wrapped at ``width``; every line ends with a newline. Lines that
    start with a ``keep_style`` fragment (code) are left for the terminal to wrap."""
    out: StyleAndTextTuples = []
    for line in split_lines(fragments):
        if keep_style and line and line[0][0] == keep_style:
            rows = [(0, "".join(t for _, t, *_ in line))]
        else:
            rows = wrap_line("".join(t for _, t, *_ in line), max(width, 1), glue)
        for start, row in rows:
            out.extend(_slice(line, start, start + len(row)))
            out.append(("", "\n"))
    return out
