"""A real stdio MCP server for the tests, built with the official SDK.

Run as ``python server_script.py [MODE]``. MODE ``mute`` never answers ``initialize`` (it
reads stdin and says nothing); ``http PORT`` serves the demo tools over Streamable HTTP at
``http://127.0.0.1:PORT/mcp``, and at ``/locked/mcp`` to requests that carry the header
``X-Demo-Token: secret`` (others get 401); anything else serves them on stdio. With
``DEMO_MARKER`` in its environment it first creates that file (proof that it was started).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def _mute() -> None:
    for _ in sys.stdin:
        pass
    time.sleep(3600)


def _locked(inner: Any) -> Any:
    """``inner`` (an ASGI app) also under ``/locked``, for requests with the token header."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/locked/"):
            if dict(scope["headers"]).get(b"x-demo-token") != b"secret":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"token required"})
                return
            scope = {**scope, "path": scope["path"].removeprefix("/locked")}
        await inner(scope, receive, send)

    return app


def main() -> None:
    if os.environ.get("DEMO_MARKER"):
        with open(os.environ["DEMO_MARKER"], "w"):
            pass
    if sys.argv[1:] == ["mute"]:
        _mute()
        return
    import anyio
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("demo")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the given reason."""
        raise ValueError(reason)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return "slept"

    @server.tool()
    def huge() -> str:
        """A result of one megabyte."""
        return "x" * (1 << 20)

    @server.tool()
    def crash() -> str:
        """The server process dies mid-call."""
        os._exit(3)

    @server.tool()
    def env(name: str) -> str:
        """The value of an environment variable."""
        return os.environ.get(name, "(unset)")

    if sys.argv[1:2] == ["http"]:
        import uvicorn

        uvicorn.run(_locked(server.streamable_http_app()), host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
