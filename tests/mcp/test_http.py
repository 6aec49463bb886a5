"""A Streamable HTTP (``url``) server: the demo server built with the SDK, run over HTTP on a
free loopback port in a subprocess (shared, ``conftest.py``), connected, listed and called
like a stdio one."""

from __future__ import annotations

from pathlib import Path

from tests.mcp.http_server import GC_WARNING, free_port, http_server
from tests.mcp.test_client import run, running
from zcoder.mcp.config import ServerConfig


@GC_WARNING
async def test_a_url_server_is_listed_and_called(tmp_path: Path, http_url: str) -> None:
    config = ServerConfig("web", url=http_url)
    async with running(tmp_path, config) as r:
        await r.ready()
        box = r.box()
        assert "mcp__web__add" in box.names()
        assert (await run(box, "mcp__web__add", tmp_path, a=2, b=3)).text == "5"
        failed = await run(box, "mcp__web__fail", tmp_path, reason="nope")
        assert not failed.ok and failed.text.startswith("Error: ")
        assert r.hub.lines()[0].startswith("web: ready")
    assert r.notices == [] and r.hub.servers[0].state == "stopped"


async def test_an_unreachable_url_is_one_line(tmp_path: Path) -> None:
    config = ServerConfig("web", url=f"http://127.0.0.1:{free_port()}/mcp", startup_timeout=5)
    async with running(tmp_path, config) as r:
        await r.until("failed")
    [line] = r.notices
    assert line.startswith("MCP server web failed: ") and "\n" not in line


@GC_WARNING
async def test_headers_are_sent_on_every_request(tmp_path: Path, http_base: str) -> None:
    url = f"{http_base}/locked/mcp"  # 401 without X-Demo-Token: secret
    config = ServerConfig("web", url=url, headers={"X-Demo-Token": "secret"})
    async with running(tmp_path, config) as r:
        await r.ready()
        assert (await run(r.box(), "mcp__web__add", tmp_path, a=2, b=3)).text == "5"
        assert r.hub.servers[0].state == "ready"
    assert r.notices == []
    async with running(tmp_path, ServerConfig("web", url=url)) as r:
        await r.until("failed")
    [line] = r.notices
    assert line.startswith("MCP server web failed: ") and "\n" not in line  # the 401


@GC_WARNING
async def test_a_url_server_that_dies_after_it_was_ready_fails_at_the_next_call(
    tmp_path: Path,
) -> None:
    with http_server() as (base, proc):  # its own: this test kills it
        async with running(tmp_path, ServerConfig("web", url=f"{base}/mcp")) as r:
            await r.ready()
            proc.kill()
            proc.wait()
            result = await run(r.box(), "mcp__web__add", tmp_path, a=1, b=2)
            assert not result.ok and "MCP server web" in result.text
            await r.until("failed")
            assert r.hub.tools() == [] and r.hub.lines()[0].startswith("web: failed: ")
    [line] = r.notices
    assert line.startswith("MCP server web failed: ") and "\n" not in line
