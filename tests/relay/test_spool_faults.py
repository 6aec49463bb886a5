"""The spool when the file system refuses: a full tmpfs, injected errors, a damaged layout,
foreign entries. Only ``SpoolFault`` comes out, and ``enqueue`` never says ``accepted`` for a
message it did not store."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.relay.helpers import make_enqueue, register_sender
from tests.relay.test_service import make_service
from zcoder.relay import client
from zcoder.relay.settings import RelaySettings
from zcoder.relay.spool import store as spool_module
from zcoder.relay.spool.store import Spool, SpoolFault


@pytest.fixture
def small_tmpfs(short_tmp: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (needs the right to mount: CI runs as root), unmounted afterwards."""
    mount = short_tmp / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def new_spool(root: Path, max_queue: int = 1000) -> tuple[Spool, list[SpoolFault]]:
    spool = Spool(root / "relay", max_queue=max_queue)
    spool.create()
    faults: list[SpoolFault] = []
    spool.on_fault(faults.append)
    return spool, faults


def leftovers(spool: Spool) -> list[str]:
    return [name for name in os.listdir(spool.root) if name.startswith(".tmp")]


def test_a_full_tmpfs_answers_full_stores_nothing_and_tells_once(small_tmpfs: Path) -> None:
    spool, faults = new_spool(small_tmpfs)
    statuses = [spool.enqueue(make_enqueue(f"1-abcd-{n}"), verified=True)[0] for n in range(64)]
    stored = statuses.count("accepted")
    assert 0 < stored < 64
    assert statuses == ["accepted"] * stored + ["full"] * (64 - stored)
    assert [(f.damaged, "No space left on device" in str(f)) for f in faults] == [(False, True)]
    assert leftovers(spool) == [] and len(os.listdir(spool.root / "inbox")) == stored
    assert spool.depth() == stored
    # the state file cannot be replaced either: the switch holds in memory, and says so
    with pytest.raises(SpoolFault, match="cannot record the relay state 'paused'") as info:
        spool.set_paused(True)
    assert not info.value.damaged and spool.paused
    assert spool.enqueue(make_enqueue("1-abcd-99"), verified=True) == ("paused", None)
    # every accepted message is still there to run, in order
    claimed = spool.claim()
    assert claimed is not None and claimed.envelope.message_id == "1-abcd-0"


def test_a_store_refused_by_the_disk_is_full_and_told_once_per_run(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool, faults = new_spool(short_tmp)

    def refuse(temp_dir: Path, path: Path, data: bytes) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(spool_module, "write_new", refuse)
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("full", None)
    assert spool.enqueue(make_enqueue("1-abcd-2"), verified=True) == ("full", None)
    assert len(faults) == 1 and "Read-only file system" in str(faults[0])
    assert spool.depth() == 0 and not spool.knows("1-abcd-1")
    monkeypatch.undo()
    assert spool.enqueue(make_enqueue("1-abcd-1"), verified=True) == ("accepted", 1)
    monkeypatch.setattr(spool_module, "write_new", refuse)
    assert spool.enqueue(make_enqueue("1-abcd-3"), verified=True) == ("full", None)
    assert len(faults) == 2  # a new run of failures is told again


@pytest.mark.parametrize("part", ["inbox", "processing", "done", "quarantine"])
def test_a_directory_replaced_by_a_file_is_damage(short_tmp: Path, part: str) -> None:
    spool, faults = new_spool(short_tmp)
    shutil.rmtree(spool.root / part)
    (spool.root / part).write_bytes(b"")
    with pytest.raises(SpoolFault, match=f"spool's {part}/ is not our own") as info:
        spool.scan()
    assert info.value.damaged
    status = spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    if part == "inbox":
        assert status == ("full", None) and faults[0].damaged
    if part in ("inbox", "processing"):
        spool.enqueue(make_enqueue("1-abcd-2"), verified=True)
        with pytest.raises(SpoolFault) as claimed:
            spool.claim()
        assert claimed.value.damaged


def test_a_state_file_replaced_by_a_directory_is_damage(short_tmp: Path) -> None:
    spool, _ = new_spool(short_tmp)
    (spool.root / "state").unlink()
    (spool.root / "state").mkdir()
    with pytest.raises(SpoolFault, match="state file is not a regular file") as info:
        spool.set_paused(True)
    assert info.value.damaged and spool.paused


def test_scan_quarantines_foreign_entries_while_the_queue_is_empty(short_tmp: Path) -> None:
    spool, faults = new_spool(short_tmp)
    inbox = spool.root / "inbox"
    (inbox / "README").write_bytes(b"hello")
    (inbox / "000000000001-1-abcd-1.json").mkdir()
    spool.scan()
    assert sorted(spool.take_problems()) == [
        "relay spool entry '000000000001-1-abcd-1.json' was quarantined: it is not a regular file",
        "relay spool entry 'README' was quarantined: its name is not <sequence>-<message-id>.json",
    ]
    assert os.listdir(inbox) == [] and faults == []
    spool.scan()  # nothing new: nothing reported
    assert spool.take_problems() == []
    # our own entries are left alone, and so is a valid one we did not write (read once)
    spool.enqueue(make_enqueue("1-abcd-2"), verified=True)
    spool.scan()
    assert spool.take_problems() == [] and spool.depth() == 1


def test_something_planted_in_processing_is_quarantined_as_damage(short_tmp: Path) -> None:
    spool, faults = new_spool(short_tmp)
    spool.enqueue(make_enqueue("1-abcd-1"), verified=True)
    (name,) = os.listdir(spool.root / "inbox")
    (spool.root / "processing" / name).mkdir()
    claimed = spool.claim()  # the planted directory goes; the message is claimed
    assert claimed is not None and claimed.envelope.message_id == "1-abcd-1"
    assert [f.damaged for f in faults] == [True]
    assert os.path.isdir(spool.root / "quarantine" / name)
    (spool.root / "processing" / "x").mkdir()
    with pytest.raises(SpoolFault, match="planted in the relay spool: processing/x"):
        spool.scan()
    assert os.path.isdir(spool.root / "quarantine" / "x")


async def test_a_service_whose_runtime_dir_is_full_answers_full_over_the_socket(
    small_tmpfs: Path, short_tmp: Path
) -> None:
    relay_dir = short_tmp / "agents"
    settings = RelaySettings(dir=relay_dir, max_queue=1024)  # the disk fills, not the queue
    svc = make_service(
        short_tmp, relay_dir, runtime_dir=small_tmpfs, scan_interval=3600, settings=settings
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        me = register_sender(relay_dir)
        iid = svc.status().instance_id
        statuses = []
        for n in range(40):
            env = make_enqueue(f"{me.instance_id}-{n}", target=iid, sender=me.instance_id)
            ack = await client.send(relay_dir / f"a-{iid}.sock", env, io_timeout=5)
            statuses.append(ack.status)
        stored = statuses.count("accepted")
        assert 0 < stored < 40 and statuses[stored:] == ["full"] * (40 - stored)
        assert svc.status().queued == stored and svc.status().available
        (line,) = svc.health.take_problems()
        assert "No space left on device" in line
        svc.pause()  # the state file cannot be written: a line, not a crash
        assert svc.status().paused
        (line,) = svc.health.take_problems()
        assert "cannot record the relay state 'paused'" in line
        nursery.cancel_scope.cancel()
    assert os.listdir(small_tmpfs) == []
