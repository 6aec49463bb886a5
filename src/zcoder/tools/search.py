"""The search tool: literal text search across workspace files, ``path:line: text`` results.

ripgrep does the work when it is on PATH (fixed-string mode, sorted by path, hidden files
included, ignore files not honoured); a pure Python walk gives the same answers otherwise.
Both skip ``SKIPPED_DIRS``, symlinks, binary files (a NUL byte) and files over
``MAX_SEARCH_BYTES``, and both stop after ``max_results`` matches. The Python walk also skips
files that report a size of 0 (``/proc`` pseudo-files, some of which never end).
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import trio

from zcoder.errors import ToolError
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.fs import SKIPPED_DIRS
from zcoder.tools.process import kill_group, open_group_process
from zcoder.tools.workspace import display, resolve

__all__ = ["MAX_SEARCH_BYTES", "SEARCH", "make_search_tool"]

MAX_SEARCH_BYTES = 4 * 1024 * 1024
_MAX_LINE_CHARS = 240

Hit = tuple[str, int, str]


def _python_files(start: Path) -> Iterator[Path]:
    """Regular files under ``start`` in ripgrep's ``--sort path`` order, never via a link."""
    if not start.is_dir():
        yield start
        return
    try:
        with os.scandir(start) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink() or entry.name in SKIPPED_DIRS:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _python_files(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


def _file_hits(path: Path, needle: bytes) -> Iterator[tuple[int, bytes]]:
    # Non-blocking, and sized before reading: under / (the sysadmin profile) a "regular"
    # file can be /proc/kmsg (a read waits for ever) or /proc/kcore (terabytes). A real
    # file of size 0 holds no match either, so pseudo-files that say 0 are skipped too.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(path, flags), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or not 0 < info.st_size <= MAX_SEARCH_BYTES:
                return
            data = f.read(MAX_SEARCH_BYTES + 1)
    except OSError:
        return
    if len(data) > MAX_SEARCH_BYTES or needle not in data or b"\0" in data:
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if needle in line:
            yield number, line


def _search_python(
    root: Path, start: Path, query: str, limit: int, stop: threading.Event
) -> tuple[list[Hit], bool]:
    needle = query.encode()
    hits: list[Hit] = []
    for path in _python_files(start):
        if stop.is_set():  # the caller was cancelled and has abandoned this thread
            break
        for number, line in _file_hits(path, needle):
            if len(hits) == limit:
                return hits, True
            hits.append((display(root, path), number, _decode_line(line)))
    return hits, False


def _decode_line(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r\n")


def _rg_argv(rg: str, query: str, start: Path) -> list[str]:
    argv = [rg, "--no-config", "--fixed-strings", "--line-number", "--with-filename"]
    argv += ["--no-heading", "--null", "--color=never", "--sort=path", "--hidden"]
    argv += ["--no-ignore", f"--max-filesize={MAX_SEARCH_BYTES}"]
    for name in sorted(SKIPPED_DIRS):
        argv += ["--glob", f"!{name}"]
    return [*argv, "-e", query, "--", str(start)]


def _parse_rg_line(root: Path, raw: bytes) -> Hit | None:
    path, sep, rest = raw.partition(b"\0")
    number, sep2, text = rest.partition(b":")
    if not (sep and sep2 and number.isdigit()):
        return None
    return display(root, Path(os.fsdecode(path))), int(number), _decode_line(text)


async def _search_rg(
    rg: str, root: Path, start: Path, query: str, limit: int
) -> tuple[list[Hit], bool] | None:
    """Hits from ripgrep, or None when it failed and the fallback should answer."""
    process = await open_group_process(_rg_argv(rg, query, start), root, merge_stderr=False)
    hits: list[Hit] = []
    pending = b""
    try:
        assert process.stdout is not None
        async for chunk in process.stdout:
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                hit = _parse_rg_line(root, line)
                if hit is None:
                    continue
                if len(hits) == limit:
                    return hits, True
                hits.append(hit)
        await process.wait()
    finally:
        await kill_group(process)
    return (hits, False) if process.returncode in (0, 1) or hits else None


async def _run_python_search(
    root: Path, start: Path, query: str, limit: int
) -> tuple[list[Hit], bool]:
    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(
            _search_python, root, start, query, limit, stop, abandon_on_cancel=True
        )
    finally:
        stop.set()


def _format(hits: list[Hit], cut: bool, query: str, where: str) -> str:
    if not hits:
        place = "the workspace" if where == "." else where
        # Say what was not looked at: a big log or a binary may hold the text after all.
        return (
            f"No matches for {query!r} in {place} (binary files and files over "
            f"{MAX_SEARCH_BYTES // (1024 * 1024)} MiB are not searched)."
        )
    lines = []
    for path, number, text in hits:
        if len(text) > _MAX_LINE_CHARS:
            text = text[: _MAX_LINE_CHARS - 3] + "..."
        lines.append(f"{path}:{number}: {text}")
    if cut:
        lines.append(f"[... stopped at {len(hits)} matches; narrow the query or the path ...]")
    return "\n".join(lines)


def make_search_tool(*, use_rg: bool = True) -> Tool:
    """The search tool; ``use_rg=False`` forces the pure Python search."""

    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        query, raw, limit = args["query"], args["path"], args["max_results"]
        if "\n" in query or "\r" in query:
            raise ToolError("query must be a single line: search matches within one line")
        start = resolve(ctx.workspace, raw)
        if not start.exists():
            raise ToolError(f"no such file or directory: {raw}")
        rg = shutil.which("rg") if use_rg else None
        found = await _search_rg(rg, ctx.workspace, start, query, limit) if rg else None
        if found is None:
            found = await _run_python_search(ctx.workspace, start, query, limit)
        hits, cut = found
        summary = f"{len(hits)} matches" + (" (cut)" if cut else "")
        return ToolResult(_format(hits, cut, query, raw), summary=summary)

    return Tool(_SPEC, run)


_SPEC = ToolSpec(
    name="search",
    description=(
        "Search the workspace's text files for a literal piece of text (not a regex; "
        "case-sensitive) and return matching lines as 'path:line: text'. Use it to find "
        "where something is defined or used, then read the file around that line."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "Exact text to find."},
            "path": {
                "type": "string",
                "minLength": 1,
                "default": ".",
                "description": "File or directory to search in.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 500,
                "default": 50,
                "description": "Stop after this many matching lines.",
            },
        },
        "required": ["query"],
    },
)

SEARCH = make_search_tool()
