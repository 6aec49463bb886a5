"""MCP servers run with the official ``mcp`` SDK (anyio, which runs on Trio).

One Trio task per server (``McpServer.run``): start the process, ``initialize`` and list its
tools within the server's ``startup_timeout``, then hold the session until the server goes
away or the task is cancelled. Each of its tools is a ``Tool`` named ``mcp__SERVER__TOOL``
with the server's input schema; a call runs ``tools/call`` on the held session from the
caller's task, so the caller's cancel scope (Escape) cancels it, and the server's
``timeout`` bounds it (a failed result; the server goes on). A server that cannot start,
does not answer in time or exits is one line through ``notice`` and its tools are withdrawn
(``on_change``); nothing it does raises into the caller's nursery. Stopping (the task's
cancellation) closes stdin, waits briefly, then kills the process tree: the SDK's shutdown,
shielded and bounded. The server's stderr goes to a temporary file whose last line explains
a failure.

Imported only when a server is configured: this module loads the SDK.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
import attrs
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from zcoder.errors import ToolError
from zcoder.mcp.config import ServerConfig
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec

__all__ = ["McpHub", "McpServer", "list_server_tools", "tool_name"]

State = Literal["disabled", "starting", "ready", "failed", "stopped"]
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64  # what OpenAI-style APIs accept
_MAX_DESCRIPTION = 2000
_STDERR_CHARS = 200


def tool_name(server: str, tool: str) -> str:
    """``mcp__SERVER__TOOL`` with characters model APIs refuse replaced by ``_``."""
    return _NAME_CHARS.sub("_", f"mcp__{server}__{tool}")[:_MAX_NAME]


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _why(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"cannot start: {exc.strerror}{where}"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def _last_line(log: TextIO) -> str:
    try:
        log.seek(0)
        lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return lines[-1][:_STDERR_CHARS] if lines else ""


def _render(content: Sequence[Any], structured: Any) -> str:
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


def _schema(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    schema = dict(raw or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


async def _pump(
    source: Any, target: Any, lost: trio.Event
) -> None:  # the SDK's stream types are generic and private
    """Copy the transport's messages to the session; ``lost`` when the server's end goes."""
    try:
        async with target:
            async for item in source:
                await target.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        lost.set()


@asynccontextmanager
async def _http_transport(url: str, headers: Mapping[str, str]) -> AsyncIterator[tuple[Any, Any]]:
    """Streamable HTTP with ``headers`` on every request: the SDK's own client (its
    timeouts) built with them, closed after the transport."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(headers)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams[0], streams[1]


class McpServer:
    """One configured server: its state, its tools while it is ready, and its task."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        cwd: Path,
        notice: Callable[[str], None] = lambda _: None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.state: State = "starting" if config.enabled else "disabled"
        self.problem = ""
        self._cwd = cwd
        self._notice = notice
        self._on_change = on_change
        self._session: ClientSession | None = None
        self._tools: list[Tool] = []
        self._lost = trio.Event()
        self._settled = trio.Event()  # no longer starting: ready, failed or stopped

    @property
    def name(self) -> str:
        return self.config.name

    def tools(self) -> list[Tool]:
        return list(self._tools) if self.state == "ready" else []

    async def settled(self) -> None:
        """Wait until the server is no longer ``starting``."""
        if self.state == "starting":
            await self._settled.wait()

    def _fail(self, problem: str) -> None:
        self._settled.set()
        was_ready = self.state == "ready"
        self.state, self.problem = "failed", problem
        self._session, self._tools = None, []
        self._notice(f"MCP server {self.name} failed: {problem}")
        if was_ready:
            self._on_change()

    async def run(self) -> None:
        """Serve until cancelled; never raises but ``trio.Cancelled``."""
        if not self.config.enabled:
            return
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
            try:
                problem = await self._serve(log)
            except Exception as exc:  # the SDK's failures, whatever their type
                problem = _why(exc)
            finally:
                if self.state == "ready":  # cancelled: a normal stop
                    self.state, self._session, self._tools = "stopped", None, []
                self._settled.set()
            if problem:
                said = _last_line(log)
                self._fail(f"{problem}; stderr: {said}" if said else problem)

    def _transport(self, log: TextIO) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        """The SDK's client transport: Streamable HTTP for a ``url``, else stdio."""
        config = self.config
        if config.url:
            return _http_transport(config.url, config.headers)
        params = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env), cwd=self._cwd
        )
        return stdio_client(params, errlog=log)

    async def _serve(self, log: TextIO) -> str:
        config = self.config
        with trio.CancelScope(deadline=trio.current_time() + config.startup_timeout) as start:
            async with (
                self._transport(log) as (read, write),
                trio.open_nursery() as nursery,
            ):
                to_session, from_pump = anyio.create_memory_object_stream[Any](0)
                nursery.start_soon(_pump, read, to_session, self._lost)
                async with ClientSession(from_pump, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    start.deadline = math.inf
                    self._ready(session, listed.tools)
                    await self._lost.wait()
                nursery.cancel_scope.cancel()
            return "the server exited"
        if start.cancelled_caught:
            return f"no answer to initialize within {config.startup_timeout:g} s"
        return "the server exited"  # pragma: no cover (the scope is left only above)

    def _ready(self, session: ClientSession, listed: Sequence[Any]) -> None:
        self._session = session
        tools: list[Tool] = []
        seen: set[str] = set()
        for t in listed:
            name = tool_name(self.name, t.name)
            if name in seen:
                continue
            seen.add(name)
            about = (t.description or t.title or t.name).strip()[:_MAX_DESCRIPTION]
            spec = ToolSpec(name, f"(MCP server {self.name}) {about}", _schema(t.input_schema))
            tools.append(Tool(spec, self._caller(t.name), asks=self._asks()))
        self._tools = tools
        self.state = "ready"
        self._settled.set()
        self._on_change()

    def _asks(self) -> Literal["always", "relayed"]:
        return "relayed" if self.config.allow else "always"

    def _caller(self, remote: str) -> Callable[[Mapping[str, Any], ToolContext], Any]:
        async def call(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
            return await self.call(remote, args)

        return call

    async def call(self, remote: str, args: Mapping[str, Any]) -> ToolResult:
        session = self._session
        if session is None or self.state != "ready":
            raise ToolError(f"MCP server {self.name} is not running ({self.state})")
        try:
            with trio.move_on_after(self.config.timeout) as waited:
                result = await session.call_tool(remote, dict(args))
            if waited.cancelled_caught:
                raise ToolError(
                    f"MCP server {self.name} did not answer {tool_name(self.name, remote)}"
                    f" within {self.config.timeout:g} s"
                )
        except MCPError as exc:
            if self._lost.is_set() or session is not self._session:
                raise ToolError(f"MCP server {self.name} stopped during the call") from None
            raise ToolError(f"MCP server {self.name}: {_why(exc)}") from None
        text = _render(result.content, result.structured_content) or "(no output)"
        ok = not result.is_error
        # The output is previewed under the card, as a command's is: "done" alone said nothing.
        summary = "done" if ok else "the tool failed"
        return ToolResult(text=text, ok=ok, summary=summary, output=text[-_PREVIEW_CHARS:])


_PREVIEW_CHARS = 4000  # the card shows the last few lines: enough for them, never a megabyte


class McpHub:
    """The configured servers, each run in its own task of one nursery."""

    def __init__(
        self,
        configs: Sequence[ServerConfig],
        *,
        cwd: Path,
        notice: Callable[[str], None],
        on_change: Callable[[], None],
    ) -> None:
        self.servers = [McpServer(c, cwd=cwd, notice=notice, on_change=on_change) for c in configs]

    def tools(self) -> list[Tool]:
        return [tool for server in self.servers for tool in server.tools()]

    async def settled(self) -> None:
        """Wait until no server is starting any more."""
        for server in self.servers:
            await server.settled()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every server until cancelled; started at once (servers start in the
        background, their tools appear as each is ready)."""
        async with trio.open_nursery() as nursery:
            for server in self.servers:
                nursery.start_soon(server.run, name=f"mcp:{server.name}")
            task_status.started()

    def lines(self) -> list[str]:
        """``/mcp``: one line per server, then its tools."""
        if not self.servers:
            return ["No MCP servers are configured (zcoder mcp add NAME -- COMMAND ...)."]
        out: list[str] = []
        for s in self.servers:
            allow = ", allowed without asking in local turns" if s.config.allow else ""
            state = f"failed: {s.problem}" if s.state == "failed" else s.state
            out.append(f"{s.name}: {state}{allow} ({s.config.describe()})")
            out.extend(f"  {tool.spec.name}" for tool in s.tools())
        return out


async def list_server_tools(config: ServerConfig, cwd: Path) -> tuple[list[tuple[str, str]], str]:
    """``zcoder mcp test``: start the server, list its tools, stop it. Returns the tools
    (model-facing name, description) and the problem ("" when it worked)."""
    found: list[tuple[str, str]] = []
    problems: list[str] = []

    def ready() -> None:
        found.extend((t.spec.name, t.spec.description) for t in server.tools())
        nursery.cancel_scope.cancel()

    config = attrs.evolve(config, enabled=True)
    server = McpServer(config, cwd=cwd, notice=problems.append, on_change=ready)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.run)
    return found, server.problem
