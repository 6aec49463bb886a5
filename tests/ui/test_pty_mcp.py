"""An MCP server in the app, in a real terminal: configured in config.toml, listed by
``/mcp``, its tool asked about like a command and called for real (the SDK demo server of
``tests/mcp``, over stdio)."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from tests.mcp.http_server import SCRIPT
from tests.ui.conftest import (
    Launch,
    PtyDirs,
    StartFake,
    messages_of,
    script,
    submit,
    text_response,
    wait_ready,
    wait_requests,
)


def _config(dirs: PtyDirs) -> None:
    home = dirs.home / "zcoder"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f"[mcp.servers.demo]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SCRIPT)}]\n"
    )


def _call_add(a: int, b: int) -> dict[str, Any]:
    call = {"name": "mcp__demo__add", "arguments": {"a": a, "b": b}}
    return {"chunks": [{"tool_calls": [call]}]}


def test_mcp_lists_the_server_and_its_tool_is_asked_and_called(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    _config(pty_dirs)
    fake = start_fake(script(_call_add(2, 3), text_response("The sum is in.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "/mcp")
    app.wait_for("demo: starting (")
    # The SDK takes a second or more to start: ask again until it says ready.
    deadline = time.monotonic() + 30
    while "demo: ready (" not in app.all_text():
        assert time.monotonic() < deadline, app.describe()
        time.sleep(0.5)
        submit(app, "/mcp")
    app.wait_for("    mcp__demo__add")  # its tools, listed under it
    submit(app, "add two and three")
    # Asked like a command, naming the tool and its arguments.
    app.wait_for("wants to call the MCP tool mcp__demo__add with:")
    app.send("y")
    app.wait_for("The sum is in.")
    assert re.search(r"✓ mcp__demo__add.*completed · done\n\s*⎿ 5\n", app.all_text())
    first, second = wait_requests(fake, 2)
    assert "mcp__demo__add" in {t["function"]["name"] for t in first.get("tools", [])}
    (result,) = messages_of(second, "tool")
    assert "5" in result  # the server computed it
