"""Writing tools: write_file and replace_text.

Both confine the path, refuse dangling symlinks and non-regular files, and replace the file
atomically (temp file + ``os.replace``, mode kept). Each result carries a short unified diff
for the interface; the model gets a one-line confirmation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from zcoder.errors import ToolError, ZcoderError
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.files import decode_text, read_regular, write_atomic
from zcoder.tools.output import short_diff
from zcoder.tools.workspace import display, existing_file, writable_file

__all__ = ["REPLACE_TEXT", "WRITE_FILE", "make_parents", "write_or_fail"]


def make_parents(path: Path, shown: str) -> None:
    """Create the missing directories above ``path`` (canonical, inside the workspace)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create the parent directories, one is a file: {shown}") from None
    except OSError as exc:
        raise ToolError(f"cannot create the parent directory of {shown}: {exc.strerror}") from None


def write_or_fail(path: Path, data: bytes, shown: str) -> None:
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror}") from None


def _old_text(path: Path, shown: str) -> str | None:
    """The current text, for the diff only; None when binary or too large."""
    try:
        return decode_text(read_regular(path, shown), shown)
    except ZcoderError:
        return None


def _write_sync(ctx: ToolContext, raw: str, content: str) -> ToolResult:
    path = writable_file(ctx.workspace, raw)
    existed = path.exists()
    old = _old_text(path, raw) if existed else None
    data = content.encode()
    make_parents(path, raw)
    write_or_fail(path, data, raw)
    verb = "Overwrote" if existed else "Created"
    diff = short_diff(display(ctx.workspace, path), old if existed else None, content)
    return ToolResult(
        text=f"{verb} {raw} ({len(data)} bytes).",
        summary=f"{verb.lower()}, {len(data)} bytes",
        diff=diff if old is not None or not existed else "",
    )


async def _write_file(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    return await trio.to_thread.run_sync(_write_sync, ctx, args["path"], args["content"])


WRITE_FILE = Tool(
    ToolSpec(
        name="write_file",
        description=(
            "Create a file, or replace a whole file, with the given content. Missing parent "
            "directories are created. Give the complete file content, not a fragment. To "
            "change part of an existing file, prefer replace_text or apply_patch."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File to write."},
                "content": {"type": "string", "description": "The complete new content."},
            },
            "required": ["path", "content"],
        },
    ),
    _write_file,
)


def _matches(text: str, needle: str) -> list[int]:
    """Start offsets of every occurrence, overlapping ones included."""
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _crlf_variant(text: str, old: str, new: str) -> tuple[str, str]:
    """Let LF-only arguments match a CRLF file, keeping its line endings."""
    if "\r\n" in text and "\n" in old and "\r\n" not in old and old not in text:
        return old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
    return old, new


def _replace_sync(ctx: ToolContext, raw: str, old: str, new: str) -> ToolResult:
    if old == new:
        raise ToolError("old_text and new_text are the same: nothing to replace")
    path = existing_file(ctx.workspace, raw)
    writable_file(ctx.workspace, raw)
    text = decode_text(read_regular(path, raw), raw, strict=True)
    old, new = _crlf_variant(text, old, new)
    found = _matches(text, old)
    if not found:
        raise ToolError(
            f"old_text not found in {raw}; read the file again and copy the exact lines, "
            "including indentation and blank lines"
        )
    if len(found) > 1:
        raise ToolError(
            f"old_text matches {len(found)} times in {raw}; include more surrounding lines "
            "so that it matches exactly once"
        )
    updated = text[: found[0]] + new + text[found[0] + len(old) :]
    write_or_fail(path, updated.encode(), raw)
    line = text.count("\n", 0, found[0]) + 1
    return ToolResult(
        text=f"Replaced the text at line {line} of {raw}.",
        summary=f"line {line}",
        diff=short_diff(display(ctx.workspace, path), text, updated),
    )


async def _replace_text(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    return await trio.to_thread.run_sync(
        _replace_sync, ctx, args["path"], args["old_text"], args["new_text"]
    )


REPLACE_TEXT = Tool(
    ToolSpec(
        name="replace_text",
        description=(
            "Replace one exact piece of text in a file. old_text must match the file "
            "exactly once, character for character (indentation and blank lines included); "
            "copy it from read_file output, without line numbers, and include enough "
            "surrounding lines to make it unique. new_text replaces it; use an empty "
            "new_text to delete it."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "description": "File to edit."},
                "old_text": {
                    "type": "string",
                    "minLength": 1,
                    "description": "Exact text to find (must occur exactly once).",
                },
                "new_text": {"type": "string", "description": "Text to put in its place."},
            },
            "required": ["path", "old_text", "new_text"],
        },
    ),
    _replace_text,
)
