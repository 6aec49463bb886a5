"""What a sandboxed command must not change (``scan``) and the bwrap line it makes (``plan``):
pure enough to need no bubblewrap."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from zcoder.sandbox.plan import Confinement, Mask, Protected, bwrap_argv, sandbox_environment
from zcoder.sandbox.scan import remove_created, scan_workspace


def test_a_repository_with_instructions_submodules_and_dependencies(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "AGENTS.md").write_text("root rules\n")
    (ws / "lib" / "deep").mkdir(parents=True)
    (ws / "lib" / "deep" / "AGENTS.md").write_text("deep rules\n")
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "pkg" / "AGENTS.md").write_text("a dependency's own\n")
    module = ws / ".git" / "modules" / "vendor" / "lib"
    (module / "hooks").mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text("[core]\n")
    (ws / "vendor" / "lib").mkdir(parents=True)
    (ws / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/vendor/lib\n")
    found = scan_workspace(ws)
    assert found.readonly == tuple(
        sorted(
            [
                ws / ".git",  # whole, and the submodule's inside it too
                module,
                ws / "AGENTS.md",
                ws / "lib" / "deep" / "AGENTS.md",
                ws / "vendor" / "lib" / ".git",
            ]
        )
    )
    assert found.masks == ()
    # The folders that lead to them cannot be renamed; inside .git nothing can be anyway.
    lib, vendor = ws / "lib", ws / "vendor"
    assert found.pinned == (lib, vendor, lib / "deep", vendor / "lib")


def test_what_does_not_exist_yet_is_masked(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    assert scan_workspace(ws) == Protected(
        (), (Mask(ws / ".git", "dir"), Mask(ws / "AGENTS.md", "dir"))
    )
    (ws / ".git").mkdir()
    assert scan_workspace(ws).masks == (
        Mask(ws / "AGENTS.md", "dir"),  # git lists no empty directory
    )


def test_only_new_instruction_files_are_removed(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "AGENTS.md").write_text("kept\n")
    before = scan_workspace(ws)
    (ws / "new").mkdir()
    (ws / "new" / "AGENTS.md").write_text("made by the command\n")
    (ws / "other.md").write_text("not instructions\n")
    assert remove_created(before, scan_workspace(ws)) == [ws / "new" / "AGENTS.md"]
    assert sorted(p.name for p in ws.rglob("*")) == ["AGENTS.md", "new", "other.md"]


def test_a_new_link_named_agents_md_is_removed_and_never_what_it_points_to(
    tmp_path: Path,
) -> None:
    ws = tmp_path.resolve()
    (ws / "notes.txt").write_text("mine\n")
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "pkg" / "AGENTS.md").write_text("a dependency's own\n")
    before = scan_workspace(ws)
    (ws / "x").mkdir()
    (ws / "x" / "AGENTS.md").symlink_to("../notes.txt")
    (ws / "y").mkdir()
    (ws / "y" / "AGENTS.md").symlink_to("../node_modules/pkg/AGENTS.md")
    removed = remove_created(before, scan_workspace(ws))
    assert removed == [ws / "x" / "AGENTS.md", ws / "y" / "AGENTS.md"]
    assert not os.path.lexists(ws / "x" / "AGENTS.md")
    assert not os.path.lexists(ws / "y" / "AGENTS.md")
    assert (ws / "notes.txt").read_text() == "mine\n"
    assert (ws / "node_modules" / "pkg" / "AGENTS.md").read_text() == "a dependency's own\n"


def test_a_known_instruction_file_that_moved_is_never_removed(tmp_path: Path) -> None:
    ws = tmp_path.resolve()
    (ws / "sub").mkdir()
    (ws / "sub" / "AGENTS.md").write_text("the user's\n")
    before = scan_workspace(ws)
    (ws / "sub").rename(ws / "sub2")  # from outside the sandbox: inside it cannot be
    assert remove_created(before, scan_workspace(ws)) == []
    assert (ws / "sub2" / "AGENTS.md").read_text() == "the user's\n"


def test_the_bwrap_line_mounts_in_order_and_shares_the_network_only_when_asked() -> None:
    ws = Path("/w")
    plan = Confinement(
        bwrap="/usr/bin/bwrap",
        workspace=ws,
        private=(Path("/tmp"),),
        hidden_dirs=(Path("/home/a/.ssh"),),
        hidden_files=(Path("/home/a/.netrc"),),
    )
    protected = Protected(
        (ws / ".git" / "hooks",), (Mask(ws / "AGENTS.md", "file"),), pinned=(ws / ".git",)
    )
    argv = bwrap_argv(plan, protected, ws / "sub", ["bash", "-c", "make"])
    line = " ".join(argv)
    order = [
        "--ro-bind / /",
        "--tmpfs /tmp",
        "--bind /w /w",
        "--bind /w/.git /w/.git",
        "--ro-bind /w/.git/hooks /w/.git/hooks",
        "--ro-bind /dev/null /w/AGENTS.md",
        "--tmpfs /home/a/.ssh --remount-ro /home/a/.ssh",
        "--ro-bind /dev/null /home/a/.netrc",
        "--chdir /w/sub -- bash -c make",
    ]
    assert [line.index(part) for part in order] == sorted(line.index(part) for part in order)
    assert "--unshare-net" in argv and "--cap-drop ALL" in line
    shared = bwrap_argv(Confinement("/usr/bin/bwrap", ws, network=True), Protected(), ws, ["x"])
    assert "--unshare-net" not in shared


def test_only_allowlisted_variables_reach_the_sandbox() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/a",
        "LC_ALL": "C.UTF-8",
        "GITHUB_TOKEN": "ghp_x",
        "OPENAI_API_KEY": "sk-x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "ZCODER_API_KEY": "x",
        "SSH_AUTH_SOCK": "/run/a.sock",
    }
    assert sandbox_environment(env) == {
        "PATH": "/usr/bin",
        "HOME": "/home/a",
        "LC_ALL": "C.UTF-8",
    }
