from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.relay.helpers import PeerProcess
from tests.relay.zsh_peer import ZshPeer
from zcoder.subcommands.agents import run_agents

_REPO = Path(__file__).resolve().parents[1]


def agents(relay_dir: Path | None, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``zcoder agents`` with ``ZCODER_RELAY_DIR=relay_dir`` (unset when ``None``)."""
    full_env = {k: v for k, v in os.environ.items() if k != "ZCODER_RELAY_DIR"}
    full_env.update(env)
    if relay_dir is not None:
        full_env["ZCODER_RELAY_DIR"] = os.fspath(relay_dir)
    return subprocess.run(
        [sys.executable, "-m", "zcoder", "agents", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=_REPO,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [((), "No other local zcoder instances are available.\n"), (("--json",), "[]\n")],
)
def test_no_peers_and_absent_dir_is_not_created(
    short_tmp: Path, args: tuple[str, ...], expected: str
) -> None:
    relay_dir = short_tmp / "zcoder-agents"  # the default one: no instance has started yet
    out = agents(None, *args, XDG_RUNTIME_DIR=os.fspath(short_tmp))
    assert (out.returncode, out.stdout, out.stderr) == (0, expected, "")
    assert not relay_dir.exists()


def test_existing_empty_dir(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    relay_dir.mkdir(mode=0o700)
    out = agents(relay_dir)
    assert out.returncode == 0
    assert out.stdout == "No other local zcoder instances are available.\n"


def test_one_peer_table_and_json(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    workspace = short_tmp / "weekly-digest"
    workspace.mkdir()
    with PeerProcess(relay_dir, "weekly-digest", workspace) as peer:
        out = agents(relay_dir)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert [line.split() for line in lines] == [
            ["PROJECT", "PID", "STATE", "PROFILE", "MODEL", "INSTANCE", "ID"],
            ["WORKSPACE"],
            ["weekly-digest", str(peer.pid), "ready", "coding", "qwen3-coder", peer.instance_id],
            [os.fspath(workspace)],
        ]
        out = agents(relay_dir, "--json")
        assert out.returncode == 0, out.stderr
        [record] = json.loads(out.stdout)
        assert list(record) == [
            "instance_id",
            "pid",
            "project",
            "workspace",
            "session_id",
            "profile",
            "model",
            "socket",
            "state",
            "started_at",
        ]
        assert record["instance_id"] == peer.instance_id
        assert record["pid"] == peer.pid
        assert record["project"] == "weekly-digest"
        assert record["workspace"] == os.fspath(workspace)
        assert (record["profile"], record["model"], record["state"]) == (
            "coding",
            "qwen3-coder",
            "ready",
        )
        assert record["socket"] == os.fspath(peer.socket)
        assert type(record["started_at"]) is int
        assert peer.command("pause") == "OK"
        out = agents(relay_dir, "--json")
        assert json.loads(out.stdout)[0]["state"] == "paused"
    out = agents(relay_dir)
    assert out.stdout == "No other local zcoder instances are available.\n"


def test_listing_a_live_peer_loads_no_event_loop_and_no_converter(short_tmp: Path) -> None:
    """The pongs are awaited with plain blocking sockets and read without cattrs."""
    relay_dir = short_tmp / "agents"
    workspace = short_tmp / "digest"
    workspace.mkdir()
    probe = (
        "import contextlib, io, json, sys\n"
        "from zcoder.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['agents', '--json'])\n"
        "print(json.dumps([code, json.loads(out.getvalue()), sorted(sys.modules)]))"
    )
    env = {**os.environ, "ZCODER_RELAY_DIR": os.fspath(relay_dir)}
    with PeerProcess(relay_dir, "digest", workspace) as peer:
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=30
        )
        assert out.returncode == 0, out.stderr
        code, records, modules = json.loads(out.stdout)
    assert code == 0
    assert [(r["instance_id"], r["state"]) for r in records] == [(peer.instance_id, "ready")]
    assert {"trio", "cattrs", "asyncio"} & set(modules) == set()


def test_a_zsh_peer_is_listed(short_tmp: Path) -> None:
    """A live peer of the other implementation: acks with ``queue_position`` 0 and
    ``state`` on every status, a 0644 manifest without a trailing newline, a 20-digit nonce."""
    relay_dir = short_tmp / "agents"
    relay_dir.mkdir(mode=0o700)
    with ZshPeer(relay_dir, state="paused", project="digest-zsh", workspace="/w/d") as peer:
        out = agents(relay_dir)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        row, workspace = lines[2].split(), lines[3].strip()  # the workspace on a second row
        assert row[:3] == ["digest-zsh", str(peer.pid), "paused"]
        assert (row[-1], workspace) == (peer.instance_id, "/w/d")
        out = agents(relay_dir, "--json")
        [record] = json.loads(out.stdout)
        assert (record["instance_id"], record["state"]) == (peer.instance_id, "paused")
        assert [answer for _, answer in peer.requests()] == ["pong", "pong"]


def test_unsafe_dir_exits_1_with_the_reason(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    relay_dir.mkdir()
    os.chmod(relay_dir, 0o750)
    out = agents(relay_dir)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.startswith("zcoder agents: relay directory ")
    assert "has mode 0750" in out.stderr


def test_symlinked_dir_exits_1(short_tmp: Path) -> None:
    (short_tmp / "real").mkdir(mode=0o700)
    (short_tmp / "agents").symlink_to(short_tmp / "real")
    out = agents(short_tmp / "agents", "--json")
    assert out.returncode == 1 and "is a symbolic link" in out.stderr


def test_invalid_relay_setting_exits_1(short_tmp: Path) -> None:
    out = agents(short_tmp / "agents", ZCODER_RELAY_IO_TIMEOUT="soon")
    assert out.returncode == 1
    assert "ZCODER_RELAY_IO_TIMEOUT" in out.stderr


def test_run_agents_in_process(short_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (short_tmp / "agents").mkdir(mode=0o700)
    env = {"ZCODER_RELAY_DIR": os.fspath(short_tmp / "agents")}
    assert run_agents(as_json=True, env=env) == 0
    assert capsys.readouterr().out == "[]\n"
    assert run_agents(as_json=False, env={"ZCODER_RELAY_DIR": "relative"}) == 1
    assert "ZCODER_RELAY_DIR" in capsys.readouterr().err


def test_an_explicit_relay_dir_that_does_not_exist_exits_1(short_tmp: Path) -> None:
    missing = short_tmp / "typo"
    for args in ((), ("--json",)):
        out = agents(missing, *args)
        assert (out.returncode, out.stdout) == (1, "")
        assert out.stderr == (
            f"zcoder agents: relay directory '{missing}' (ZCODER_RELAY_DIR) does not exist\n"
        )
    assert not missing.exists()
