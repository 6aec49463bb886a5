"""Atomic writes and per-session locks under the session store."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from zcoder.errors import SessionLocked
from zcoder.session.files import SessionLocks, write_atomic


def test_write_atomic_replaces_with_a_private_file(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("old")
    write_atomic(tmp_path, "s.json", b"new")
    assert (tmp_path / "s.json").read_bytes() == b"new"
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_locks_are_exclusive_between_tables_and_released_once(tmp_path: Path) -> None:
    mine, theirs = SessionLocks(tmp_path), SessionLocks(tmp_path)
    mine.acquire("a")
    assert "a" in mine and list(mine) == ["a"]
    assert (tmp_path / "a.lock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(SessionLocked, match="already open in this process"):
        mine.acquire("a")
    with pytest.raises(
        SessionLocked, match=f"open in another zcoder process \\(pid {os.getpid()}\\)"
    ):
        theirs.acquire("a")
    mine.release("a")
    mine.release("a")  # idempotent
    assert not (tmp_path / "a.lock").exists()
    theirs.acquire("a")
    assert "a" in theirs and "a" not in mine
    theirs.release("a")


def test_a_failed_pid_write_still_locks_and_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*_: object) -> int:
        raise OSError(28, "No space left on device")

    fds_before = len(os.listdir("/proc/self/fd"))
    locks, other = SessionLocks(tmp_path), SessionLocks(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", disk_full)
        locks.acquire("a")
    with pytest.raises(SessionLocked):
        other.acquire("a")
    locks.release("a")
    assert len(os.listdir("/proc/self/fd")) == fds_before
