"""Reading tools: list_files, read_file, read_file_range.

Tools raise ``ToolError``/``WorkspaceError`` for a refused call; ``Toolbox.call`` turns
those into ``Error: ...`` results. Disk work runs in a worker thread so a slow filesystem
never stalls the interface.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from zcoder.errors import ToolError
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.files import decode_text, read_line_range, read_regular
from zcoder.tools.output import cap_text
from zcoder.tools.workspace import display, existing_dir, existing_file

__all__ = ["LIST_FILES", "READ_FILE", "READ_FILE_RANGE", "SKIPPED_DIRS", "split_lines"]

# Shown but never descended into (list_files) or searched (search): tool caches and vendored
# trees would crowd out the project's own files.
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox",
     ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)  # fmt: skip

_PATH = {"type": "string", "minLength": 1}
_RANGE_FRAME = 120


def _entry_name(entry: os.DirEntry[str], rel: str) -> tuple[str, bool]:
    """How an entry is shown, and whether to descend into it."""
    if entry.is_symlink():
        try:
            return f"{rel} -> {os.readlink(entry.path)}", False
        except OSError:
            return f"{rel} -> ?", False
    if entry.is_dir(follow_symlinks=False):
        if entry.name in SKIPPED_DIRS:
            return f"{rel}/ (not listed)", False
        return f"{rel}/", True
    return rel, False


def _list_sync(root: Path, start: Path, limit: int) -> tuple[list[str], bool]:
    """Breadth first, so a cut listing still shows the top levels."""
    shown: list[str] = []
    queue = deque([start])
    while queue:
        directory = queue.popleft()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if directory == start:
                raise ToolError(f"cannot list {display(root, start)}: {exc.strerror}") from None
            continue  # an unreadable subdirectory is shown, just not expanded
        for entry in entries:
            if len(shown) >= limit:
                return shown, True
            name, descend = _entry_name(entry, display(root, Path(entry.path)))
            shown.append(name)
            if descend:
                queue.append(Path(entry.path))
    return shown, False


async def _list_files(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    raw, limit = args["path"], args["max_entries"]
    start = existing_dir(ctx.workspace, raw)
    shown, cut = await trio.to_thread.run_sync(
        _list_sync, ctx.workspace, start, limit, abandon_on_cancel=True
    )
    if not shown:
        return ToolResult(text=f"{raw}: empty directory", summary="empty")
    text = "\n".join(shown)
    if cut:
        text += (
            f"\n[... listing stopped at {limit} entries; list a subdirectory"
            " or pass a larger max_entries ...]"
        )
    summary = f"{len(shown)} entries" + (" (cut)" if cut else "")
    return ToolResult(text=text, summary=summary)


LIST_FILES = Tool(
    ToolSpec(
        name="list_files",
        description=(
            "List files and directories under a directory of the workspace, recursively "
            "(breadth first). Paths are relative to the workspace root; directories end "
            "with '/'. Symlinks are shown as 'link -> target' and not followed. Use this "
            "first to find your way around a project."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {**_PATH, "default": ".", "description": "Directory to list."},
                "max_entries": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 2000,
                    "default": 100,
                    "description": "Stop after this many entries.",
                },
            },
            "required": [],
        },
    ),
    _list_files,
)


def split_lines(text: str) -> list[str]:
    """Lines numbered as editors and grep do: only LF ends a line; a CR before it is dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _read_text(ctx: ToolContext, raw: str) -> str:
    path = existing_file(ctx.workspace, raw)
    try:
        data = read_regular(path, raw)
    except ToolError as exc:  # too large: say how to read it after all
        raise ToolError(f"{exc}; read it in parts with read_file_range") from None
    return decode_text(data, raw)


async def _read_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    text = await trio.to_thread.run_sync(_read_text, ctx, args["path"], abandon_on_cancel=True)
    if not text:
        return ToolResult(text="(empty file)", summary="empty")
    lines = len(split_lines(text))
    if len(text) > ctx.output_cap:
        hint = "\n[file cut in the middle: use read_file_range to read the omitted lines]"
        text = cap_text(text, max(ctx.output_cap - len(hint), 0)) + hint
    return ToolResult(text=text, summary=f"{lines} line{'' if lines == 1 else 's'}")


READ_FILE = Tool(
    ToolSpec(
        name="read_file",
        description=(
            "Read a whole text file of the workspace and return its exact content. Very "
            "long files come back with the middle left out; read those parts with "
            "read_file_range."
        ),
        parameters={
            "type": "object",
            "properties": {"path": {**_PATH, "description": "File to read."}},
            "required": ["path"],
        },
    ),
    _read_file,
)


def _range_sync(ctx: ToolContext, raw: str, first: int, last: int) -> tuple[list[str], int]:
    path = existing_file(ctx.workspace, raw)
    # Room for the header and the "stopped" line, so the cap never cuts the middle out.
    room = _RANGE_FRAME + len(raw)
    return read_line_range(path, raw, first, last, ctx.output_cap - room)


async def _read_file_range(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    raw, first, last = args["path"], args["start_line"], args["end_line"]
    if last < first:
        raise ToolError(f"end_line ({last}) is before start_line ({first})")
    lines, total = await trio.to_thread.run_sync(
        _range_sync, ctx, raw, first, last, abandon_on_cancel=True
    )
    if first > total:
        raise ToolError(f"start_line {first} is past the end of {raw} ({total} lines)")
    end = first + len(lines) - 1
    body = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, start=first))
    text = f"{raw} lines {first}-{end} of {total}:\n{body}"
    if end < min(last, total):
        text += f"\n[... stopped at the output limit; read on from line {end + 1} ...]"
    return ToolResult(text=text, summary=f"lines {first}-{end}")


READ_FILE_RANGE = Tool(
    ToolSpec(
        name="read_file_range",
        description=(
            "Read lines start_line to end_line (1-based, inclusive) of a text file. Each "
            "line comes back as its line number, a tab, then the line. The numbers are not "
            "part of the file: never copy them into old_text or a patch."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {**_PATH, "description": "File to read."},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line."},
                "end_line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Last line (included); past the end means to the end.",
                },
            },
            "required": ["path", "start_line", "end_line"],
        },
    ),
    _read_file_range,
)
