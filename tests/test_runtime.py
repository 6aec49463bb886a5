"""The private runtime directory, and the removal of those killed instances left behind."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from zcoder.runtime import make_runtime_dir, open_runtime_dir, remove_stale_runtime_dirs


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(proc.stdout)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid
    raise AssertionError(f"pid {pid} was reused at once")  # pragma: no cover


def left_behind(path: Path) -> Path:
    """A runtime directory as a killed instance leaves it: a queued task's text inside."""
    inbox = path / "relay" / "inbox"
    inbox.mkdir(parents=True, mode=0o700)
    (inbox / "000000000001-1-abcd-1.json").write_text("the text of a queued task")
    return path


def test_stale_dirs_of_dead_instances_are_removed_and_nothing_else(short_tmp: Path) -> None:
    tmp, xdg, elsewhere = short_tmp / "tmp", short_tmp / "xdg", short_tmp / "elsewhere"
    for path in (tmp, xdg, elsewhere):
        path.mkdir(mode=0o700)
    env = {"TMPDIR": str(tmp), "XDG_RUNTIME_DIR": str(xdg)}
    dead, uid = dead_pid(), os.getuid()
    stale = [
        left_behind(xdg / f"zcoder-{dead}-0123abcd"),
        left_behind(tmp / f"zcoder-{uid}-{dead}-89abcdef"),
    ]
    kept = [
        left_behind(xdg / f"zcoder-{os.getpid()}-0123abcd"),  # a live pid
        left_behind(tmp / f"zcoder-{uid}-{os.getppid()}-0123abcd"),
        left_behind(xdg / f"zcoder-{dead}-0123abc"),  # names outside the grammar
        left_behind(xdg / f"zcoder-{dead}-0123ABCD"),
        left_behind(xdg / f"zcoder-{dead}-0123abcd-x"),
        left_behind(xdg / f"zcoder-{uid}-{dead}-0123abcd"),  # the tmp grammar in xdg
        left_behind(tmp / f"zcoder-{dead}-0123abcd"),  # and the xdg one in tmp
        left_behind(tmp / f"zcoder-{uid + 1}-{dead}-0123abcd"),  # another uid's name
        left_behind(xdg / "zcoder-agents"),
        left_behind(xdg / f"other-{dead}-0123abcd"),
    ]
    target = left_behind(elsewhere / "target")
    link = xdg / f"zcoder-{dead}-feedf00d"
    link.symlink_to(target)
    plain = xdg / f"zcoder-{dead}-deadbeef"
    plain.write_text("a file, not a directory")
    if os.geteuid() == 0:  # a directory of another owner, with our grammar
        foreign = left_behind(xdg / f"zcoder-{dead}-0badf00d")
        os.chown(foreign, 4242, 4242)
        kept.append(foreign)

    assert sorted(remove_stale_runtime_dirs(env)) == sorted(stale)
    assert not any(os.path.lexists(path) for path in stale)
    for path in kept:
        assert (path / "relay" / "inbox" / "000000000001-1-abcd-1.json").exists(), path
    assert link.is_symlink() and (target / "relay" / "inbox").is_dir()
    assert plain.read_text() == "a file, not a directory"
    assert remove_stale_runtime_dirs(env) == []


def test_make_runtime_dir_sweeps_first_and_leaves_a_private_dir(short_tmp: Path) -> None:
    env = {"TMPDIR": str(short_tmp)}
    stale = left_behind(short_tmp / f"zcoder-{os.getuid()}-{dead_pid()}-0123abcd")
    path = make_runtime_dir(env)
    try:
        assert not stale.exists()
        assert path.parent == short_tmp and path.name.startswith(f"zcoder-{os.getuid()}-")
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700
    finally:
        path.rmdir()
    with open_runtime_dir(env) as opened:
        assert opened.is_dir()
    assert not opened.exists()


def test_a_missing_place_is_no_error(short_tmp: Path) -> None:
    assert remove_stale_runtime_dirs({"TMPDIR": str(short_tmp / "missing")}) == []
