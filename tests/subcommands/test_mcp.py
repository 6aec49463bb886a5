"""``zcoder mcp``'s config and trust logic (no server is started): ``untrust``, ``list`` with
the workspace's ``.mcp.json``, and ``headers`` whose values are never printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zcoder.errors import ConfigError
from zcoder.mcp.config import ServerConfig, load_servers
from zcoder.mcp.project import read_project, trust_path
from zcoder.subcommands.mcp import run_mcp

TOKEN = "Bearer s3cr3t-t0ken"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def env(home: Path) -> dict[str, str]:
    return {"ZCODER_HOME": str(home)}


def project(workspace: Path, *names: str) -> None:
    servers = {n: {"command": "srv", "args": [n]} for n in names}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_untrust_removes_the_record_once(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project(workspace, "proj")
    other = workspace.parent / "other"
    other.mkdir()
    project(other, "two")
    assert run_mcp(["trust", str(workspace)], env(home)) == 0
    assert run_mcp(["trust", str(other)], env(home)) == 0
    capsys.readouterr()

    assert run_mcp(["untrust", str(workspace)], env(home)) == 0
    assert capsys.readouterr().out == (
        f"Untrusted .mcp.json in {workspace}: its MCP servers no longer start there.\n"
    )
    found = read_project(home, workspace)
    assert found is not None and not found.trusted and not found.changed
    kept = read_project(home, other)
    assert kept is not None and kept.trusted

    assert run_mcp(["untrust", str(workspace)], env(home)) == 1
    err = capsys.readouterr().err
    assert err == f"zcoder mcp untrust: .mcp.json in {workspace} was not trusted\n"


def test_untrust_works_once_the_file_is_gone(home: Path, workspace: Path) -> None:
    project(workspace, "proj")
    assert run_mcp(["trust", str(workspace)], env(home)) == 0
    (workspace / ".mcp.json").unlink()
    assert run_mcp(["untrust", str(workspace)], env(home)) == 0
    assert json.loads(trust_path(home).read_text())["workspaces"] == {}


def test_list_shows_the_workspace_servers_and_their_trust(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text('[mcp.servers.mine]\ncommand = "x"\n')
    project(workspace, "proj", "mine")
    source = workspace / ".mcp.json"
    hint = f"zcoder mcp trust {workspace}"

    def listed(*args: str) -> list[str]:
        assert run_mcp(["list", *args], env(home)) == 0
        return capsys.readouterr().out.splitlines()

    assert listed("-w", str(workspace)) == [
        "mine: x",
        f"proj: srv proj  [{source}, not trusted: {hint}]",
        f"mine: srv mine  [{source}, not trusted: {hint}, not started: config.toml has mine]",
    ]
    assert run_mcp(["trust", str(workspace)], env(home)) == 0
    capsys.readouterr()
    assert listed("-w", str(workspace))[1] == f"proj: srv proj  [{source}, trusted]"
    project(workspace, "proj", "new")
    assert listed("-w", str(workspace))[1:] == [
        f"proj: srv proj  [{source}, changed since trusted: {hint}]",
        f"new: srv new  [{source}, changed since trusted: {hint}]",
    ]
    # the app's workspace by default: ZCODER_WORKSPACE here
    assert run_mcp(["list"], {**env(home), "ZCODER_WORKSPACE": str(workspace)}) == 0
    assert f"new: srv new  [{source}" in capsys.readouterr().out


def test_list_without_servers_and_with_a_malformed_file(
    home: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_mcp(["list", "-w", str(workspace)], env(home)) == 0
    assert capsys.readouterr().out == (
        "No MCP servers (zcoder mcp add NAME -- COMMAND [ARGS...]).\n"
    )
    (home / "config.toml").write_text('[mcp.servers.mine]\ncommand = "x"\n')
    (workspace / ".mcp.json").write_text('{"mcpServers": []}')
    assert run_mcp(["list", "-w", str(workspace)], env(home)) == 2
    out, err = capsys.readouterr()
    assert out == "mine: x\n"
    assert err == f"zcoder mcp: {workspace}/.mcp.json: mcpServers: expected an object\n"


def test_headers_are_kept_and_their_values_never_shown(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text('# mine\nmodel = "m"\n')
    (home / "config.toml").chmod(0o644)
    url = "http://127.0.0.1:9/mcp"
    args = ["add", "web", "--url", url, "--header", f"Authorization: {TOKEN}"]
    assert run_mcp([*args, "--header", "X-Team: blue"], env(home)) == 0
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600  # it now holds a token
    (web,) = load_servers(home)
    assert web == ServerConfig("web", url=url, headers={"Authorization": TOKEN, "X-Team": "blue"})
    assert run_mcp(["disable", "web"], env(home)) == 0  # a rewrite keeps them
    assert load_servers(home)[0].headers == web.headers
    assert "[mcp.servers.web.headers]" in (home / "config.toml").read_text()
    capsys.readouterr()

    assert run_mcp(["list"], env(home)) == 0
    assert run_mcp(["get", "web"], env(home)) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"web: {url}  [disabled, headers: Authorization, X-Team]",
        f"web: {url}  [disabled, headers: Authorization, X-Team]",
        "  header Authorization: (not shown)",
        "  header X-Team: (not shown)",
    ]
    assert TOKEN not in out and "blue" not in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--header", "Authorization", "--url", "http://h/"], "expected NAME: VALUE"),
        (["--header", "A: b", "--", "srv"], "--header needs --url"),
    ],
)
def test_a_bad_header_option_is_one_line(
    home: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert run_mcp(["add", "web", *args], env(home)) == 2
    assert said in capsys.readouterr().err
    assert not (home / "config.toml").exists()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('headers = "x"', "mcp.servers.web.headers: expected a table of strings"),
        ("headers = { A = 1 }", "mcp.servers.web.headers: expected a table of strings"),
        ('headers = { "A B" = "v" }', "mcp.servers.web.headers.A B: not an HTTP header name"),
        ('headers = { A = "v\\nw" }', "mcp.servers.web.headers.A: a header value is one line"),
    ],
)
def test_a_bad_headers_table_is_one_line(home: Path, body: str, said: str) -> None:
    path = home / "config.toml"
    path.write_text(f'[mcp.servers.web]\nurl = "http://h/"\n{body}\n')
    with pytest.raises(ConfigError) as err:
        load_servers(home)
    assert str(err.value) == f"config file {path}: {said}"


def test_headers_belong_to_url_servers(home: Path) -> None:
    (home / "config.toml").write_text('[mcp.servers.a]\ncommand = "x"\nheaders = { A = "v" }\n')
    with pytest.raises(ConfigError, match=r"a\.headers: only a url server sends headers"):
        load_servers(home)


def test_env_values_are_never_shown_and_make_the_file_private(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text(
        f'[mcp.servers.db]\ncommand = "srv"\n\n[mcp.servers.db.env]\nAPI_TOKEN = "{TOKEN}"\n'
    )
    (home / "config.toml").chmod(0o644)
    assert run_mcp(["get", "db"], env(home)) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1:] == ["  env API_TOKEN=(not shown)"]
    assert TOKEN not in out
    assert run_mcp(["disable", "db"], env(home)) == 0  # a rewrite: the token stays private
    assert (home / "config.toml").stat().st_mode & 0o777 == 0o600


def test_the_trust_hint_is_a_command_that_can_be_pasted(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spaced = tmp_path / "my work"
    spaced.mkdir()
    project(spaced, "lint")
    assert run_mcp(["list", "-w", str(spaced)], env(home)) == 0
    assert f"not trusted: zcoder mcp trust '{spaced}']" in capsys.readouterr().out
    found = read_project(home, spaced)
    assert found is not None and f"zcoder mcp trust '{spaced}'" in found.untrusted_line()
