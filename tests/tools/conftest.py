"""A canonical workspace with an outside neighbour, and a toolbox that calls into it."""

from __future__ import annotations

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
