"""A Streamable HTTP (``url``) server: the demo server built with the SDK, run over HTTP on a
free loopback port in a subprocess, connected, listed and called like a stdio one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.test_client import SCRIPT, run, running
from zcoder.mcp.config import ServerConfig


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP test server did not start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


# The SDK's HTTP transport leaves httpx2 response generators to the garbage collector when
# its task group is cancelled; Trio's finalizer reports that as a ResourceWarning (ignored
# outside tests by default). Nothing leaks: the generators are finalized.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
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
    config = ServerConfig("web", url=f"http://127.0.0.1:{_free_port()}/mcp", startup_timeout=5)
    async with running(tmp_path, config) as r:
        await r.until("failed")
    [line] = r.notices
    assert line.startswith("MCP server web failed: ") and "\n" not in line
