"""A workspace's ``.mcp.json``: nothing starts until the user trusts it, its servers start
once trusted, and a changed file is untrusted again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from tests.mcp.http_server import SCRIPT
from zcoder.errors import ConfigError
from zcoder.mcp.link import McpLink
from zcoder.mcp.project import parse_project, read_project, trust_path
from zcoder.subcommands.mcp import run_mcp
from zcoder.tools.base import Tool


def project(workspace: Path, marker: Path, name: str = "proj") -> None:
    server = {"command": sys.executable, "args": [SCRIPT], "env": {"DEMO_MARKER": str(marker)}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {name: server}}))


async def start(home: Path, workspace: Path, wait: bool) -> tuple[McpLink, list[str], list[str]]:
    """Start the link, wait for its tools (``wait``) or until whatever it started is ready
    or failed (a server started by mistake has made its marker then), stop it."""
    notices: list[str] = []
    names: list[str] = []
    offered = trio.Event()

    def offer(tools: list[Tool]) -> None:
        names[:] = [t.spec.name for t in tools]
        if tools:
            offered.set()

    link = McpLink(home, workspace, offer)
    async with trio.open_nursery() as nursery:
        await link.start(nursery, notices.append)
        if wait:
            with trio.fail_after(20):
                await offered.wait()
        else:
            with trio.fail_after(20):
                await link.settled()
        nursery.cancel_scope.cancel()
    return link, notices, names


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    workspace.mkdir()
    return home, workspace, tmp_path / "started"


async def test_untrusted_starts_nothing_trusted_starts_changed_is_untrusted(
    dirs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, workspace, marker = dirs
    project(workspace, marker)
    said = (
        f".mcp.json in {workspace} names 1 MCP server; they do not start until you trust it:"
        f" zcoder mcp trust {workspace}"
    )
    link, notices, names = await start(home, workspace, wait=False)
    assert notices == [said] and names == [] and link.lines() == [said]
    assert not marker.exists() and not trust_path(home).exists()

    assert run_mcp(["trust", str(workspace)], {"ZCODER_HOME": str(home)}) == 0
    out = capsys.readouterr().out
    assert f"Trusted .mcp.json in {workspace}: its 1 MCP server starts in later" in out
    assert f"  proj: {sys.executable} {SCRIPT}" in out
    link, notices, names = await start(home, workspace, wait=True)
    assert notices == [] and "mcp__proj__add" in names and marker.exists()
    assert link.lines()[0].startswith("proj: ")

    marker.unlink()
    project(workspace, marker, name="other")
    link, notices, names = await start(home, workspace, wait=False)
    assert notices == [said] and names == [] and not marker.exists()


async def test_the_config_file_wins_a_name_clash(dirs: tuple[Path, Path, Path]) -> None:
    home, workspace, marker = dirs
    project(workspace, marker)
    assert run_mcp(["trust", str(workspace)], {"ZCODER_HOME": str(home)}) == 0
    (home / "config.toml").write_text('[mcp.servers.proj]\ncommand = "x"\nenabled = false\n')
    link, notices, names = await start(home, workspace, wait=False)
    assert notices == [] and names == [] and not marker.exists()
    assert link.lines() == ["proj: disabled (x)"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("{", ".mcp.json: not JSON"),
        ('{"mcpServers": []}', "mcpServers: expected an object"),
        ('{"mcpServers": {"a": {"args": ["x"]}}}', "mcpServers.a: needs exactly one of"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "a.env: expected an"),
        ('{"mcpServers": {"a": {"url": "http://h/", "headers": {"A B": "x"}}}}', "not an HTTP"),
        ('{"mcpServers": {"a": {"command": "x", "headers": {"A": "x"}}}}', "only a url server"),
    ],
)
async def test_a_malformed_file_is_one_line_and_not_trusted(
    dirs: tuple[Path, Path, Path], body: str, said: str
) -> None:
    home, workspace, _ = dirs
    (workspace / ".mcp.json").write_text(body)
    _link, notices, _ = await start(home, workspace, wait=False)
    assert len(notices) == 1 and said in notices[0] and "\n" not in notices[0]
    assert run_mcp(["trust", str(workspace)], {"ZCODER_HOME": str(home)}) == 2
    assert not trust_path(home).exists()


def test_trust_without_a_file_and_types_other_agents_write(
    dirs: tuple[Path, Path, Path],
) -> None:
    home, workspace, _ = dirs
    assert run_mcp(["trust", str(workspace)], {"ZCODER_HOME": str(home)}) == 1
    (workspace / ".mcp.json").write_text(
        '{"mcpServers": {"a": {"type": "stdio", "command": "x"}, "b": {"type": "http", '
        '"url": "http://h/", "headers": {"Authorization": "Bearer t"}}}}'
    )
    found = read_project(home, workspace)
    assert found is not None and not found.trusted
    assert [(s.name, s.command, s.url, s.allow, s.headers) for s in found.servers] == [
        ("a", "x", "", False, {}),
        ("b", "", "http://h/", False, {"Authorization": "Bearer t"}),
    ]


def test_a_bad_entry_names_the_json_file_not_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    body = b'{"mcpServers": {"a": {"url": "http://h/", "headers": {"A B": "x"}}}}'
    with pytest.raises(ConfigError) as caught:
        parse_project(path, body)
    assert str(caught.value) == f"{path}: mcpServers.a.headers.A B: not an HTTP header name"
