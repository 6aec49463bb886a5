"""The one atomic file write: all or nothing, no temp file left, each caller's guarantees."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from zcoder.atomic_write import commit_file, stage_file, write_file


def _disk_full(*_: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_write_replaces_the_file_with_a_private_one(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    os.chmod(target, 0o644)
    write_file(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["f.json"]


def test_a_full_disk_mid_write_keeps_the_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    before = _fds()
    written: list[int] = []

    def half_then_full(fd: int, data: object) -> int:
        if written:
            return _disk_full()
        written.append(fd)
        return os.pwrite(fd, bytes(memoryview(data))[:2], 0)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError) as caught:
        write_file(target, b"new data")
    monkeypatch.undo()
    assert caught.value.errno == errno.ENOSPC
    assert written, "the write never started"
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.json"]
    assert _fds() == before


def test_a_failed_fsync_or_rename_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    for name in ("fsync", "replace"):
        with monkeypatch.context() as patch:
            patch.setattr(os, name, _disk_full)
            with pytest.raises(OSError, match="No space"):
                write_file(target, b"new")
        assert target.read_bytes() == b"old"
        assert os.listdir(tmp_path) == ["f"]


def test_sync_flags_decide_what_is_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real = os.fsync

    def record(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    write_file(tmp_path / "a", b"x", sync=False)
    assert synced == []
    write_file(tmp_path / "a", b"x")
    assert synced == [False]
    synced.clear()
    write_file(tmp_path / "a", b"x", sync_dir=True)
    assert synced == [False, True]


def test_a_failed_directory_fsync_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync

    def dir_fails(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "I/O error")
        real(fd)

    monkeypatch.setattr(os, "fsync", dir_fails)
    write_file(tmp_path / "a", b"x", sync_dir=True)
    assert (tmp_path / "a").read_bytes() == b"x"


def test_keep_mode_keeps_the_replaced_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_bytes(b"old")
    os.chmod(target, 0o751)
    write_file(target, b"new", keep_mode=True, mode=0o666)
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    fresh = tmp_path / "new.txt"
    umask = os.umask(0o022)
    try:
        write_file(fresh, b"x", keep_mode=True, mode=0o666)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    link = tmp_path / "link"
    link.symlink_to(outside)
    write_file(link, b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert outside.read_bytes() == b"keep"


def test_stage_names_the_temp_file_and_commit_moves_it(tmp_path: Path) -> None:
    spool, inbox = tmp_path / "root", tmp_path / "root" / "inbox"
    inbox.mkdir(parents=True)
    temp = stage_file(inbox / "e.json", b"x", temp_dir=spool, prefix=".tmp-", suffix="")
    assert temp.parent == spool and temp.name.startswith(".tmp-")
    assert len(temp.name) == len(".tmp-") + 16
    default = stage_file(inbox / "e.json", b"y", suffix=".zcoder-tmp")
    assert default.name.startswith(".e.json.") and default.name.endswith(".zcoder-tmp")
    commit_file(temp, inbox / "e.json")
    assert (inbox / "e.json").read_bytes() == b"x" and not temp.exists()
    with pytest.raises(FileNotFoundError):
        commit_file(temp, tmp_path / "gone" / "e.json")
    commit_file(default, inbox / "e.json")
    assert sorted(os.listdir(inbox)) == ["e.json"]
