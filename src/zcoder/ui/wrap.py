"""Word wrapping for text that keeps growing (the streamed answer). Pure.

Rows already complete never change when more text arrives, so the live area only redraws
its last row per token instead of reflowing the whole screen; ``TailWrap`` remembers where
the complete rows end and wraps only what came after.
"""

from __future__ import annotations

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

__all__ = [
    "TailWrap",
    "fit",
    "split_lines",
    "usable_hang",
    "wrap_fragments",
    "wrap_hanging",
    "wrap_line",
]


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


def usable_hang(width: int, hang: int) -> int:
    """``hang``, or 0 when it would leave continuation rows less than half the width."""
    return hang if 0 < hang <= max(width, 1) // 2 else 0


def wrap_hanging(line: str, width: int, hang: int, glue: str = "") -> list[tuple[int, str]]:
    """``wrap_line``, but the rows after the first are ``usable_hang(width, hang)`` columns
    narrower: they go under the text after a marker (``· ``, ``3. ``, a command's name),
    not under the marker (the caller puts that many blanks before them)."""
    width = max(width, 1)
    rows = wrap_line(line, width, glue)
    hang = usable_hang(width, hang)
    if len(rows) == 1 or not hang:
        return rows
    rest = rows[1][0]
    return [rows[0], *((rest + at, row) for at, row in wrap_line(line[rest:], width - hang, glue))]


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
    fragments: StyleAndTextTuples,
    width: int,
    *,
    keep_style: str = "",
    glue: str = "",
    hang_style: str = "",
) -> StyleAndTextTuples:
    """Styled lines word-wrapped at ``width``; every line ends with a newline. Lines that
    start with a ``keep_style`` fragment (code) are left for the terminal to wrap; lines
    that start with a ``hang_style`` fragment (a list item's bullet) continue under the
    text after it."""
    out: StyleAndTextTuples = []
    for line in split_lines(fragments):
        text = "".join(t for _, t, *_ in line)
        if keep_style and line and line[0][0] == keep_style:
            rows, hang = [(0, text)], 0
        else:
            bullet = hang_style and line and line[0][0] == hang_style
            hang = usable_hang(width, _cells(line[0][1]) if bullet else 0)
            rows = wrap_hanging(text, width, hang, glue)
        for n, (start, row) in enumerate(rows):
            if n and hang:
                out.append(("", " " * hang))
            out.extend(_slice(line, start, start + len(row)))
            out.append(("", "\n"))
    return out
