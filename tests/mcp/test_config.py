"""The ``[mcp.servers.NAME]`` tables and ``zcoder mcp``: checked, written back, round trip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.mcp.http_server import GC_WARNING, SCRIPT
from zcoder.config_file import read_file
from zcoder.errors import ConfigError
from zcoder.mcp.config import ServerConfig, load_servers, save_servers
from zcoder.subcommands.mcp import run_mcp


def write(home: Path, text: str) -> None:
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)


def test_servers_are_read_and_settings_ignore_the_mcp_table(tmp_path: Path) -> None:
    write(
        tmp_path,
        'model = "m"\n[mcp.servers.demo]\ncommand = "x"\nargs = ["-v"]\nallow = true\n'
        '[mcp.servers.demo.env]\nK = "v"\n',
    )
    assert read_file(tmp_path / "config.toml") == {"model": "m"}
    (demo,) = load_servers(tmp_path)
    assert demo == ServerConfig("demo", "x", ("-v",), {"K": "v"}, allow=True)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('[mcp.servers.a]\nargs = ["x"]\n', "mcp.servers.a: needs exactly one of command"),
        ('[mcp.servers.a]\ncommand = "x"\ncmd = 1\n', "mcp.servers.a.cmd: unknown key"),
        ('[mcp.servers.a]\ncommand = "x"\nargs = "y"\n', "args: expected a list of strings"),
        ('[mcp.servers.a__b]\ncommand = "x"\n', "a server name is letters"),
        ('[mcp.servers.a]\ncommand = "x"\nallow = "yes"\n', "allow: expected true or false"),
        ("[mcp]\nserver = 1\n", "mcp.server: unknown key"),
        ('[mcp.servers.a]\ncommand = "x"\ntimeout = "9"\n', "a.timeout: expected a number"),
        ('[mcp.servers.a]\ncommand = "x"\ntimeout = 0\n', "a.timeout: must be more than 0"),
    ],
)
def test_a_bad_table_is_one_line(tmp_path: Path, body: str, said: str) -> None:
    write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_servers(tmp_path)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_file_written_another_way_is_not_rewritten(tmp_path: Path) -> None:
    write(tmp_path, 'mcp = { servers = { a = { command = "x" } } }\n')
    with pytest.raises(ConfigError, match="edit it by hand"):
        save_servers(tmp_path, ())
    assert "command" in (tmp_path / "config.toml").read_text()


@GC_WARNING
def test_zcoder_mcp_add_list_test_disable_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], http_url: str
) -> None:
    env = {"ZCODER_HOME": str(tmp_path)}
    write(tmp_path, '# mine\nmodel = "m"\n\n[relay]\nmax_queue = 3\n')
    assert run_mcp(["add", "demo", "--env", "K=v", "--", sys.executable, SCRIPT], env) == 0
    assert run_mcp(["add", "demo", "--", "x"], env) == 1
    assert run_mcp(["add", "web", "--url", http_url], env) == 0
    assert run_mcp(["list"], env) == 0
    assert run_mcp(["test", "web"], env) == 0
    out = capsys.readouterr().out
    assert f"demo: {sys.executable} {SCRIPT}" in out and f"web: {http_url}" in out
    assert "web: 6 tools" in out and "  mcp__web__add  (MCP server web) Add two" in out
    assert run_mcp(["remove", "web"], env) == 0
    assert run_mcp(["add", "slow", "--timeout", "0", "--", "x"], env) == 2
    assert run_mcp(["add", "slow", "--timeout", "7.5", "--", "x"], env) == 0
    assert load_servers(tmp_path)[1].timeout == 7.5
    assert "timeout = 7.5" in (tmp_path / "config.toml").read_text()
    assert run_mcp(["remove", "slow"], env) == 0
    assert run_mcp(["disable", "demo"], env) == 0
    assert load_servers(tmp_path)[0].enabled is False
    assert run_mcp(["remove", "demo"], env) == 0
    assert (tmp_path / "config.toml").read_text() == (
        '# mine\nmodel = "m"\n\n[relay]\nmax_queue = 3\n'
    )
    assert run_mcp(["get", "demo"], env) == 1


def test_the_tool_call_decision() -> None:
    from zcoder.approval.policy import decide_tool_call

    def d(asks: str, policy: str = "ask", profile: str = "coding", origin: str = "user") -> str:
        return decide_tool_call(asks, policy=policy, profile=profile, origin=origin)  # type: ignore[arg-type]

    assert d("always") == "ask" and d("relayed") == "run" and d("always", "allow") == "run"
    assert d("relayed", origin="relay") == d("always", "allow", origin="relay") == "ask"
    assert d("relayed", profile="sysadmin") == "ask"
    assert d("relayed", "deny") == "deny"
