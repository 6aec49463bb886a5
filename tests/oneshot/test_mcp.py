"""``zcoder -p`` starts the configured MCP servers before its turn (the SDK demo server of
``tests/mcp``) and stops them after; without a terminal their calls are refused."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.fakes.ollama_server import FakeOllama
from tests.mcp.http_server import SCRIPT
from tests.oneshot.test_run import MODEL, _run, _say, _tool, workspace

__all__ = ["workspace"]


def _configure(allow: bool, command: str = sys.executable) -> None:
    home = Path(os.environ["ZCODER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        "[mcp.servers.demo]\n"
        f"command = {json.dumps(command)}\n"
        f"args = [{json.dumps(SCRIPT)}]\n"
        f"allow = {'true' if allow else 'false'}\n"
        "startup_timeout = 30.0\n"
    )


def _script() -> dict[str, object]:
    return {"models": [MODEL], "responses": [_tool("mcp__demo__add", a=2, b=3), _say("Five.")]}


def test_a_configured_server_serves_the_one_shot_turn(workspace: Path) -> None:
    _configure(allow=True)
    with FakeOllama(_script()) as fake:
        done = _run(["--host", fake.url, "-p", "add 2 and 3"], workspace)
        assert done.returncode == 0, done.stderr
        assert "Five." in done.stdout
        offered = [t["function"]["name"] for t in fake.requests[0]["tools"]]
        assert "mcp__demo__add" in offered
        result = fake.requests[1]["messages"][-1]
        assert result["role"] == "tool" and result["content"] == "5"


def test_without_a_terminal_an_mcp_call_is_refused(workspace: Path) -> None:
    _configure(allow=False)
    with FakeOllama(_script()) as fake:
        done = _run(["--host", fake.url, "-p", "add 2 and 3"], workspace, new_session=True)
        assert done.returncode == 0, done.stderr
        result = fake.requests[1]["messages"][-1]
        assert result["role"] == "tool" and result["content"] != "5"
        assert "denied" in result["content"]


def test_a_server_that_cannot_start_is_one_line_and_the_turn_runs(workspace: Path) -> None:
    _configure(allow=True, command="/nonexistent/mcp-server")
    script = {"models": [MODEL], "responses": [_say("Hello.")]}
    with FakeOllama(script) as fake:
        done = _run(["--host", fake.url, "-p", "hi"], workspace)
        assert done.returncode == 0, done.stderr
        assert "Hello." in done.stdout
        [line] = [x for x in done.stderr.splitlines() if "MCP server demo" in x]
        assert line.startswith("zcoder: MCP server demo failed: cannot start")
