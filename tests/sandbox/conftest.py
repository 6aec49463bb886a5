"""The real sandbox, or a skip that says why it cannot work on this machine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from zcoder.sandbox.plan import Confinement
from zcoder.sandbox.probe import check_sandbox
from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import Toolbox, core_tools

Run = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def bwrap() -> str:
    found = check_sandbox()
    if not found.works:
        pytest.skip(f"the sandbox cannot work here: {found.line()}")
    return found.bwrap


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    return root


@pytest.fixture
def plan(bwrap: str, ws: Path) -> Confinement:
    return Confinement(bwrap=bwrap, workspace=ws, private=(Path("/tmp"),))


@pytest.fixture
def run(ws: Path, plan: Confinement) -> Callable[..., Awaitable[ToolResult]]:
    """``run_command`` in the sandbox ``plan`` (or another given as ``sandbox=``)."""
    toolbox = Toolbox(core_tools())

    async def go(command: str, sandbox: Confinement | None = plan, **kw: Any) -> ToolResult:
        ctx = ToolContext(workspace=ws, sandbox=sandbox)
        return await toolbox.call("run_command", {"command": command, **kw}, ctx)

    return go
