"""Unified diffs, pure: parse a patch and apply its hunks to text. No I/O.

Lenient where small models slip and nothing is lost: text before the first ``---`` header
(``diff --git``, ``index``, a code fence) is skipped; hunk line counts are not trusted (a
hunk runs until the next header); an ``@@`` line without numbers is searched for in the whole
file; an empty line inside a hunk is an empty context line. Strict where a guess could
damage a file: every ``-`` and context line must match the file exactly (the hunk may sit at
another line than its header says; the nearest match wins), and a line that is not part of
the unified diff grammar inside a hunk is an error.
"""

from __future__ import annotations

import re

import attrs

from zcoder.errors import ToolError

__all__ = ["FilePatch", "Hunk", "TextFile", "apply_file_patch", "parse_patch"]

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\"


@attrs.frozen
class Hunk:
    """One ``@@`` block. ``old_start`` is 1-based, None when the header gave no numbers."""

    old_start: int | None
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    old_no_newline: bool = False
    new_no_newline: bool = False
    added: int = 0
    removed: int = 0


@attrs.frozen
class FilePatch:
    """The changes to one file; a None path is ``/dev/null`` (creation or deletion)."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]


@attrs.frozen
class TextFile:
    """A text file as lines without their ending, plus how to write it back."""

    lines: tuple[str, ...]
    final_newline: bool = True
    crlf: bool = False

    @classmethod
    def from_text(cls, text: str) -> TextFile:
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        stripped = tuple(line.removesuffix("\r") for line in lines)
        return cls(stripped, final_newline=text.endswith("\n"), crlf="\r\n" in text)

    def to_text(self) -> str:
        sep = "\r\n" if self.crlf else "\n"
        return sep.join(self.lines) + (sep if self.lines and self.final_newline else "")


def _header_path(value: str) -> str | None:
    value = value.split("\t", 1)[0].strip()
    if value == "/dev/null":
        return None
    if len(value) > 1 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return value


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """git's ``a/`` and ``b/`` prefixes go; a path that merely starts with ``a/`` stays."""
    old_ok = old is None or old.startswith("a/")
    new_ok = new is None or new.startswith("b/")
    if old_ok and new_ok and (old or new):
        return (old[2:] if old else None), (new[2:] if new else None)
    return old, new


def parse_patch(text: str) -> list[FilePatch]:
    """Every file section of a unified diff; ``ToolError`` says what is wrong and where."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip_prefixes(_header_path(line[4:]), _header_path(lines[i + 1][4:]))
            if old is None and new is None:
                raise ToolError(f"invalid patch: line {i + 1}: both sides are /dev/null")
            hunks, i = _parse_hunks(lines, i + 2, new or old or "")
            files.append(FilePatch(old, new, tuple(hunks)))
        elif line.startswith("@@"):
            raise ToolError(
                f"invalid patch: line {i + 1}: hunk before any file header; start each file "
                "with '--- a/PATH' and '+++ b/PATH' lines"
            )
        else:
            i += 1
    if not files:
        raise ToolError(
            "invalid patch: no file headers found; a unified diff needs '--- a/PATH' and "
            "'+++ b/PATH' lines, then '@@' hunks"
        )
    return files


def _ends_hunk(lines: list[str], i: int) -> bool:
    line = lines[i]
    if line.startswith(("@@", "diff --git ", "```")):
        return True
    return line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _parse_hunks(lines: list[str], i: int, name: str) -> tuple[list[Hunk], int]:
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith("@@"):
        match = _HUNK_HEADER.match(lines[i])
        start = int(match.group(1)) if match else None
        if match and match.group(2) == "0":
            start = (start or 0) + 1  # "-5,0": insert after line 5, i.e. before line 6
        body: list[str] = []
        i += 1
        while i < len(lines) and not _ends_hunk(lines, i):
            body.append(lines[i])
            i += 1
        while body and body[-1] == "":
            body.pop()  # trailing blank lines: end of text, or context we can do without
        hunks.append(_hunk(start, body, name, len(hunks) + 1))
        while i < len(lines) and lines[i].startswith("```"):
            i += 1
    if i < len(lines) and not _ends_hunk(lines, i) and lines[i].strip():
        raise ToolError(f"invalid patch: line {i + 1}: expected an '@@' hunk header for {name}")
    return hunks, i


def _hunk(start: int | None, body: list[str], name: str, number: int) -> Hunk:
    old: list[str] = []
    new: list[str] = []
    flags = {"old": False, "new": False}
    last = ""
    for line in body:
        tag, rest = (line[:1] or " "), line[1:]
        if tag == _NO_NEWLINE:
            flags["old"] |= last in " -"
            flags["new"] |= last in " +"
            continue
        if tag not in " -+":
            raise ToolError(
                f"invalid patch: hunk {number} of {name}: line {line!r} does not start with "
                "' ', '-' or '+' (context lines need a leading space)"
            )
        if tag in " -":
            old.append(rest)
        if tag in " +":
            new.append(rest)
        last = tag
    if old == new and flags["old"] == flags["new"]:
        raise ToolError(f"invalid patch: hunk {number} of {name} changes nothing")
    added = sum(1 for line in body if line.startswith("+"))
    removed = sum(1 for line in body if line.startswith("-"))
    return Hunk(start, tuple(old), tuple(new), flags["old"], flags["new"], added, removed)


def apply_file_patch(current: TextFile | None, patch: FilePatch, name: str) -> TextFile | None:
    """The file after ``patch``; None when the patch deletes it. ``current`` None = absent."""
    if patch.old_path is None:
        if current is not None:
            raise ToolError(f"{name} already exists; patch it with '--- a/{name}', not /dev/null")
        current = TextFile(())
    elif current is None:
        raise ToolError(f"no such file: {name}")
    elif not patch.hunks:
        raise ToolError(f"invalid patch: no hunks for {name}")
    result = _apply_hunks(current, patch.hunks, name)
    if patch.new_path is None:
        if result.lines:
            raise ToolError(f"the patch deletes {name} but its hunks do not remove every line")
        return None
    return result


def _apply_hunks(file: TextFile, hunks: tuple[Hunk, ...], name: str) -> TextFile:
    lines = list(file.lines)
    final_newline = file.final_newline or not file.lines
    offset = 0  # where the original line numbers now sit, after earlier hunks
    floor = 0  # hunks apply in order and never overlap
    for number, hunk in enumerate(hunks, start=1):
        expected = floor if hunk.old_start is None else max(hunk.old_start - 1 + offset, 0)
        at = _locate(lines, hunk, expected, floor)
        if at is None:
            raise ToolError(_mismatch(lines, hunk, number, name, expected))
        lines[at : at + len(hunk.old_lines)] = hunk.new_lines
        floor = at + len(hunk.new_lines)
        if hunk.old_start is not None:
            offset = floor - (hunk.old_start - 1 + len(hunk.old_lines))
        if hunk.new_no_newline:
            final_newline = False
        elif hunk.old_no_newline:
            final_newline = True
    return TextFile(tuple(lines), final_newline, file.crlf)


def _locate(lines: list[str], hunk: Hunk, expected: int, floor: int) -> int | None:
    """The match of the hunk's old lines nearest to ``expected``, not before ``floor``."""
    old = list(hunk.old_lines)
    if not old:
        if hunk.old_start is None and lines:
            return None  # a pure insertion needs a line number or context to place it
        return min(max(expected, floor), len(lines))
    starts = [
        i
        for i in range(floor, len(lines) - len(old) + 1)
        if lines[i] == old[0] and lines[i : i + len(old)] == old
    ]
    return min(starts, key=lambda i: (abs(i - expected), i)) if starts else None


def _mismatch(lines: list[str], hunk: Hunk, number: int, name: str, expected: int) -> str:
    if not hunk.old_lines:
        return (
            f"hunk {number} of {name} does not apply: it has no context lines and no line "
            "numbers; add a few unchanged lines around the change"
        )
    shown = "\n".join(hunk.old_lines[:6])
    message = (
        f"hunk {number} of {name} does not apply: its context and '-' lines were not found "
        f"in the file (expected near line {expected + 1}). They were:\n{shown}\n"
    )
    old = [line.strip() for line in hunk.old_lines]
    loose = [line.strip() for line in lines]
    for i in range(len(loose) - len(old) + 1):
        if loose[i : i + len(old)] == old:
            message += f"They match at line {i + 1} if whitespace is ignored: check indentation.\n"
            break
    return message + "Read the file again and make the patch from its current content."
