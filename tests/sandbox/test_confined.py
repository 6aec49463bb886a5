"""Real commands in the real sandbox: what they can reach, change and leave behind.

Skipped, with the reason, where bubblewrap cannot work (``conftest.bwrap``)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
from pathlib import Path

import attrs
import pytest
import trio

from zcoder.sandbox.confine import confinement_for
from zcoder.sandbox.plan import Confinement
from zcoder.tools.base import ToolContext
from zcoder.tools.registry import Toolbox, core_tools

from ..agent.doubles import make_config
from .conftest import Run


def running(token: str) -> list[int]:
    """Live processes whose command line holds ``token`` (pids differ in the sandbox)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                line = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in line and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


async def test_the_workspace_is_writable_and_nothing_else(ws: Path, run: Run) -> None:
    marker = ws.parent / "escaped.txt"
    result = await run(f"echo made > made.txt && cat made.txt; echo x > {marker}; echo $?")
    assert result.text.startswith("Exit code: 0\nmade\n")
    assert (ws / "made.txt").read_text() == "made\n"
    assert not marker.exists()  # /tmp is private: the write went to the sandbox's own
    etc = Path("/etc")
    system = await run("echo x > /etc/zcoder-sandbox-test")
    assert "Read-only file system" in system.text and not (etc / "zcoder-sandbox-test").exists()


async def test_tmp_is_private_and_empty(ws: Path, run: Run) -> None:
    tmp, outside = Path("/tmp"), ws.parent / "neighbour.txt"
    outside.write_text("not for the sandbox\n")
    result = await run(f"cat {outside}; echo t > /tmp/scratch && cat /tmp/scratch")
    assert "No such file or directory" in result.text and result.text.endswith("t\n")
    assert not (tmp / "scratch").exists()


async def test_hidden_places_are_empty(tmp_path: Path, ws: Path, plan: Confinement) -> None:
    # A home outside the private /tmp of the plan: its secrets are hidden one by one.
    home = ws / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".netrc").write_text("machine x password hunter2\n")
    hiding = attrs.evolve(
        plan, hidden_dirs=(home / ".ssh",), hidden_files=(home / ".netrc",), private=()
    )
    ctx = ToolContext(workspace=ws, sandbox=hiding)
    command = "ls -A home/.ssh; cat home/.netrc; echo k > home/.ssh/k; echo $?"
    result = await Toolbox(core_tools()).call("run_command", {"command": command}, ctx)
    assert "PRIVATE" not in result.text and "hunter2" not in result.text
    assert "Read-only file system" in result.text
    assert sorted(os.listdir(home / ".ssh")) == ["id_ed25519"]


async def test_a_fake_homes_ssh_cannot_be_read(tmp_path: Path, ws: Path, bwrap: str) -> None:
    """End to end: the run's own confinement (``confinement_for``) with HOME elsewhere."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    plan = confinement_for(make_config(ws), bwrap, {"HOME": str(home)})
    ctx = ToolContext(workspace=ws, sandbox=plan)
    command = f"cat {home}/.ssh/id_rsa; cat ~/.ssh/id_rsa; echo done"
    result = await Toolbox(core_tools()).call("run_command", {"command": command}, ctx)
    assert "PRIVATE" not in result.text and result.text.endswith("done\n")


async def test_a_secret_in_the_environment_is_not_visible(
    monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret_token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret_key")
    monkeypatch.setenv("LC_MESSAGES", "C")
    result = await run("env; echo end")
    assert "ghp_secret_token" not in result.text and "aws_secret_key" not in result.text
    assert "\nLC_MESSAGES=C\n" in result.text and "\nPATH=" in result.text
    assert "\nGIT_TERMINAL_PROMPT=0\n" in result.text and result.text.endswith("end\n")


async def test_no_loopback_unless_the_network_is_allowed(plan: Confinement, run: Run) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused"
        closed = await run(probe)
        assert closed.text.rstrip().endswith("refused")
        opened = await run(probe, sandbox=attrs.evolve(plan, network=True))
        assert opened.text.rstrip().endswith("connected")


async def test_a_socket_in_the_relay_directory_is_out_of_reach(
    ws: Path, plan: Confinement, short_tmp: Path, run: Run
) -> None:
    """Another instance's socket: in the private /tmp, and in a directory hidden by name
    even inside the workspace (where the workspace's bind would show it again)."""
    relay = ws / "agents"
    relay.mkdir()
    for where in (short_tmp / "a-1-2.sock", relay / "a-3-4.sock"):
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(where))
            listener.listen(1)
            hidden = attrs.evolve(plan, hidden_dirs=(relay,))
            code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(where)!r})"
            result = await run(f"python3 -c {code!r} && echo reached", sandbox=hidden)
            assert "reached" not in result.text
            assert "No such file or directory" in result.text


@pytest.fixture
def repo(ws: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


async def test_the_git_directory_is_read_only_whole(repo: Path, ws: Path, run: Run) -> None:
    hooks, config = ws / ".git" / "hooks", ws / ".git" / "config"
    before = config.read_text()
    (ws / "f").write_text("x\n")
    result = await run(
        "echo evil > .git/hooks/pre-commit; echo '[core] hooksPath = x' >> .git/config;"
        " rm -rf .git/hooks; mv .git/config c; git config core.fsmonitor evil;"
        " git status --porcelain; git add f || echo cannot-add"
    )
    assert "?? f\n" in result.text and "cannot-add" in result.text  # git reads, never writes
    assert not (hooks / "pre-commit").exists() and config.read_text() == before
    assert any(p.name.endswith(".sample") for p in hooks.iterdir())


async def test_git_cannot_be_pointed_at_a_repository_the_command_wrote(
    tmp_path: Path, repo: Path, ws: Path, run: Run
) -> None:
    """The review's repro: a commondir naming a copy whose config runs a command in the
    user's next git status on the host."""
    pwned = tmp_path / "PWNED"
    await run(
        "mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/;"
        f" printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' > evil/config;"
        " echo $PWD/evil > .git/commondir; mkdir -p .git/info;"
        " echo $PWD/evil/objects > .git/objects/info/alternates"
    )
    assert not (ws / ".git" / "commondir").exists()
    assert not (ws / ".git" / "objects" / "info" / "alternates").exists()
    await trio.run_process(["git", "-C", str(ws), "status"], capture_stdout=True, check=False)
    assert not pwned.exists()


async def test_a_protected_file_cannot_be_moved_away_with_its_folder(
    repo: Path, ws: Path, run: Run
) -> None:
    (ws / "sub" / "deep").mkdir(parents=True)
    (ws / "sub" / "deep" / "AGENTS.md").write_text("the user's\n")
    result = await run(
        "mv sub sub2; mv sub/deep sub/deep2; mkdir -p sub/deep && echo EVIL > sub/deep/AGENTS.md;"
        " mv .git .gitold; echo end"
    )
    assert result.text.count("Device or resource busy") == 3, result.text
    assert (ws / "sub" / "deep" / "AGENTS.md").read_text() == "the user's\n"
    assert sorted(os.listdir(ws)) == [".git", "sub"]
    assert sorted(os.listdir(ws / "sub")) == ["deep"]


async def test_a_link_named_agents_md_is_removed_not_its_target(ws: Path, run: Run) -> None:
    (ws / "notes.txt").write_text("mine\n")
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    target = ws / "node_modules" / "pkg" / "AGENTS.md"
    target.write_text("a dependency's own\n")
    result = await run(
        "mkdir x y && ln -s ../notes.txt x/AGENTS.md"
        " && ln -s ../node_modules/pkg/AGENTS.md y/AGENTS.md; echo end"
    )
    assert result.text.endswith(
        "[zcoder removed what the sandbox forbids: x/AGENTS.md, y/AGENTS.md]\n"
    )
    for made in (ws / "x" / "AGENTS.md", ws / "y" / "AGENTS.md"):
        assert not made.is_symlink() and not made.exists()
    assert (ws / "notes.txt").read_text() == "mine\n"
    assert target.read_text() == "a dependency's own\n"


async def test_missing_instructions_cannot_be_created(repo: Path, ws: Path, run: Run) -> None:
    result = await run("echo evil > AGENTS.md; echo evil > AGENTS.md/x; ls -A")
    assert "Read-only file system" in result.text or "Permission denied" in result.text
    # No trace of the mask on the host once the command is over.
    assert sorted(os.listdir(ws)) == [".git"]


async def test_no_repository_can_be_made_at_the_root(ws: Path, run: Run) -> None:
    result = await run("git init -q . && echo INITIALISED; mkdir .git/hooks; echo $?")
    assert "INITIALISED" not in result.text
    assert os.listdir(ws) == []


async def test_git_sees_no_stand_in_for_a_missing_agents_md(repo: Path, ws: Path, run: Run) -> None:
    """What stands in for the missing AGENTS.md is nothing git lists: the model's ``git
    status`` shows only what it did."""
    result = await run("echo evil > AGENTS.md; echo new > made.txt; git status --porcelain")
    assert result.text.endswith("?? made.txt\n"), result.text
    assert sorted(os.listdir(ws)) == [".git", "made.txt"]


async def test_agents_md_anywhere_stays_as_it_is(ws: Path, run: Run) -> None:
    (ws / "AGENTS.md").write_text("be careful\n")
    (ws / "deep" / "er").mkdir(parents=True)
    (ws / "deep" / "er" / "AGENTS.md").write_text("deep rules\n")
    result = await run(
        "echo evil >> AGENTS.md; echo evil > deep/er/AGENTS.md; rm deep/er/AGENTS.md;"
        " mv AGENTS.md gone.md; mkdir -p new/dir && echo evil > new/dir/AGENTS.md; echo end"
    )
    assert (ws / "AGENTS.md").read_text() == "be careful\n"
    assert (ws / "deep" / "er" / "AGENTS.md").read_text() == "deep rules\n"
    # A new directory cannot be prepared for: its AGENTS.md is removed afterwards, and
    # the result says so.
    assert not (ws / "new" / "dir" / "AGENTS.md").exists()
    assert result.text.endswith("[zcoder removed what the sandbox forbids: new/dir/AGENTS.md]\n")


async def test_a_worktree_pointer_cannot_be_re_aimed(ws: Path, run: Run) -> None:
    (ws / ".git").write_text("gitdir: /nowhere/.git/worktrees/x\n")
    result = await run("echo 'gitdir: mine' > .git; cat .git")
    assert result.text.endswith("gitdir: /nowhere/.git/worktrees/x\n")


async def test_timeout_and_output_cap_work_as_outside(ws: Path, run: Run) -> None:
    token = f"30.{secrets.randbelow(10**6)}"
    result = await run(f"echo started; sleep {token} & sleep {token}", timeout_seconds=1)
    assert result.text == "Error: command timed out after 1 s\nstarted\n"
    assert running(token) == []
    big = await run("head -c 300000 /dev/zero | tr '\\0' a; echo; echo END")
    assert len(big.text) <= 32768 and big.text.endswith("aaaa\nEND\n")


async def test_background_children_do_not_outlive_it(run: Run) -> None:
    token = f"30.{secrets.randbelow(10**6)}"
    result = await run(f"sleep {token} & echo done")
    assert result.text == "Exit code: 0\ndone\n"
    assert running(token) == []


async def test_cancel_kills_every_process_of_the_sandbox(ws: Path, run: Run) -> None:
    token = f"30.{secrets.randbelow(10**6)}"
    finished = False

    async def go() -> None:
        nonlocal finished
        await run(f"sleep {token} & touch started; sleep {token}")
        finished = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        while not (ws / "started").exists():  # noqa: ASYNC110 - written by the sandbox
            await trio.sleep(0.01)
        while len(running(token)) < 2:  # noqa: ASYNC110
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert not finished
    assert running(token) == []


async def test_no_capability_is_left_to_undo_the_mounts(run: Run) -> None:
    result = await run("grep CapEff /proc/self/status; mount -o remount,rw / ; echo end")
    assert "CapEff:\t0000000000000000" in result.text
    assert result.text.endswith("end\n")
