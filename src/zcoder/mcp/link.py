"""A run's MCP servers: read from the config file at start-up, run in a nursery (the app's
root nursery, or the one-shot turn's), their tools offered to the agent as each server
becomes ready and withdrawn when it fails.

The servers are those of ``[mcp.servers.NAME]`` and, once the user has trusted it
(``zcoder mcp trust``), those of the workspace's ``.mcp.json`` (the config file wins on a
name clash). An untrusted (or changed) ``.mcp.json`` starts nothing and is one notice line.
The SDK (``zcoder.mcp.client``) is imported only when an enabled server is to run. A
malformed ``[mcp]`` table is one notice line; the rest of the app runs without MCP; a
malformed ``.mcp.json`` is one line and the configured servers still start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from zcoder.errors import ConfigError
from zcoder.mcp.config import ServerConfig, load_servers
from zcoder.mcp.project import read_project
from zcoder.tools.base import Tool

if TYPE_CHECKING:
    from zcoder.mcp.client import McpHub

__all__ = ["McpLink"]

_log = logging.getLogger(__name__)
_NONE = "No MCP servers are configured (zcoder mcp add NAME -- COMMAND [ARGS...])."


class McpLink:
    def __init__(self, home: Path, workspace: Path, offer: Callable[[list[Tool]], None]) -> None:
        self._home = home
        self._workspace = workspace
        self._offer = offer
        self._configs: Sequence[ServerConfig] = ()
        self._problem = ""
        self._project_line = ""
        self._hub: McpHub | None = None

    async def start(self, nursery: trio.Nursery, notice: Callable[[str], None]) -> None:
        """Start the enabled servers in ``nursery`` (each in its own task); returns at once."""
        try:
            self._configs = load_servers(self._home)
        except ConfigError as exc:
            self._problem = f"MCP servers not started: {exc}"
            notice(self._problem)
            return
        self._configs = (*self._configs, *self._project_servers(notice))
        if not any(c.enabled for c in self._configs):
            return
        from zcoder.mcp.client import McpHub  # the SDK: only with a server to run

        def said(line: str) -> None:
            _log.warning("%s", line)
            notice(line)

        hub = McpHub(self._configs, cwd=self._workspace, notice=said, on_change=self._changed)
        self._hub = hub
        await nursery.start(hub.run)

    async def settled(self) -> None:
        """Wait until every started server is ready or has failed (each within its own
        ``startup_timeout``): one-shot mode starts its turn after that."""
        if self._hub is not None:
            await self._hub.settled()

    def _project_servers(self, notice: Callable[[str], None]) -> tuple[ServerConfig, ...]:
        """The trusted ``.mcp.json``'s servers whose names the config file does not use."""
        try:
            project = read_project(self._home, self._workspace)
        except ConfigError as exc:
            self._project_line = f"MCP servers of .mcp.json not started: {exc}"
            notice(self._project_line)
            return ()
        if project is None or not project.servers:
            return ()
        if not project.trusted:
            self._project_line = project.untrusted_line()
            notice(self._project_line)
            return ()
        taken = {c.name for c in self._configs}
        return tuple(s for s in project.servers if s.name not in taken)

    def _changed(self) -> None:
        if self._hub is not None:
            self._offer(self._hub.tools())

    def lines(self) -> list[str]:
        return self._server_lines() + ([self._project_line] if self._project_line else [])

    def _server_lines(self) -> list[str]:
        if self._problem:
            return [self._problem]
        if self._hub is not None:
            return self._hub.lines()
        if not self._configs:
            return [] if self._project_line else [_NONE]
        return [f"{c.name}: disabled ({c.describe()})" for c in self._configs]
