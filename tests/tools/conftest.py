"""A canonical workspace with an outside neighbour, and a toolbox that calls into it."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import Toolbox, core_tools

Call = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws)


@pytest.fixture
def call(ctx: ToolContext) -> Call:
    toolbox = Toolbox(core_tools())

    async def run(name: str, arguments: Mapping[str, Any] | None = None, **kw: Any) -> ToolResult:
        return await toolbox.call(name, {**(arguments or {}), **kw}, ctx)

    return run


def live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (our own /proc scan)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def is_live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
