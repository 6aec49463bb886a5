"""The blocking discovery of ``zcoder agents`` finds what the app's Trio discovery finds and
drops what it drops, for the same reasons (``relay/blocking.py``)."""

from __future__ import annotations

import functools
import gc
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.relay.helpers import make_manifest, serve_fake_peer
from zcoder.errors import RelayError
from zcoder.relay.blocking import discover_blocking
from zcoder.relay.discovery import discover
from zcoder.relay.paths import ensure_relay_dir
from zcoder.relay.registry import Peer, publish_manifest


@pytest.fixture
def relay_dir(short_tmp: Path) -> Path:
    return ensure_relay_dir(short_tmp / "agents")


@contextmanager
def _listening(relay_dir: Path, instance_id: str, backlog: int) -> Iterator[socket.socket]:
    """A socket of ours that takes ``backlog`` connections and never answers."""
    with socket.socket(socket.AF_UNIX) as mute:
        mute.bind(os.fspath(relay_dir / f"a-{instance_id}.sock"))
        mute.listen(backlog)
        yield mute


def _dead_socket(relay_dir: Path, instance_id: str) -> None:
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(os.fspath(relay_dir / f"a-{instance_id}.sock"))


def _publish(relay_dir: Path, instance_id: str) -> None:
    publish_manifest(relay_dir / f"a-{instance_id}.json", make_manifest(relay_dir, instance_id))


async def _both(
    relay_dir: Path, caplog: pytest.LogCaptureFixture, exclude: str | None
) -> tuple[tuple[list[Peer], list[str]], tuple[list[Peer], list[str]]]:
    """Each discovery's peers and the lines it logged for what it dropped."""
    results = []
    for blocking in (False, True):
        caplog.clear()
        if blocking:
            run = functools.partial(
                discover_blocking, relay_dir, exclude_instance_id=exclude, io_timeout=0.3
            )
            peers = await trio.to_thread.run_sync(run)
        else:
            peers = await discover(relay_dir, exclude_instance_id=exclude, io_timeout=0.3)
        lines = sorted(r.getMessage() for r in caplog.records if r.name == "zcoder.relay.registry")
        results.append((peers, lines))
    return results[0], results[1]


async def test_the_same_peers_and_the_same_drops_as_the_trio_discovery(
    relay_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="zcoder.relay.registry")
    (relay_dir / "a-1-nosock.json").write_text("{}")
    (relay_dir / "a-2-resv.json").write_bytes(b"")
    (relay_dir / "a-2-resv.sock").write_bytes(b"")
    _publish(relay_dir, "3-dead")
    _dead_socket(relay_dir, "3-dead")
    _publish(relay_dir, "4-mute")
    _publish(relay_dir, "5-full")
    with (
        _listening(relay_dir, "4-mute", 4),
        _listening(relay_dir, "5-full", 0) as full,
        socket.socket(socket.AF_UNIX) as holder,
    ):
        holder.connect(os.fspath(relay_dir / "a-5-full.sock"))  # its backlog stays full
        async with trio.open_nursery() as nursery:
            await serve_fake_peer(nursery, relay_dir, "6-other", answer_as="6-xxxx")
            await serve_fake_peer(nursery, relay_dir, "7-live", state="busy", project="b")
            await serve_fake_peer(nursery, relay_dir, "8-live", project="A")
            await serve_fake_peer(nursery, relay_dir, "9-self")
            (trio_peers, trio_lines), (peers, lines) = await _both(relay_dir, caplog, "9-self")
            nursery.cancel_scope.cancel()
        assert full.fileno() >= 0
    assert [(p.manifest.instance_id, p.state) for p in peers] == [
        ("8-live", "ready"),
        ("7-live", "busy"),
    ]
    assert peers == trio_peers
    assert lines == trio_lines
    assert [line.split(":")[0] for line in lines] == [
        f"relay discovery dropped a-{iid}.json"
        for iid in ("1-nosock", "2-resv", "3-dead", "4-mute", "5-full", "6-other")
    ]
    assert "answered wrong_target" in lines[-1]
    assert all("no answer to the ping within 0.3 s" in line for line in lines[3:5])


def test_an_unreadable_directory_is_a_relay_error(short_tmp: Path) -> None:
    not_a_dir = short_tmp / "file"
    not_a_dir.write_text("")
    with pytest.raises(RelayError, match="cannot read relay directory"):
        discover_blocking(not_a_dir, exclude_instance_id=None, io_timeout=0.3)


def test_a_missing_directory_has_no_peers(short_tmp: Path) -> None:
    assert discover_blocking(short_tmp / "none", exclude_instance_id=None, io_timeout=0.3) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_every_connection_is_closed(relay_dir: Path) -> None:
    _publish(relay_dir, "4-mute")
    _publish(relay_dir, "5-full")
    with (
        _listening(relay_dir, "4-mute", 4),
        _listening(relay_dir, "5-full", 0),
        socket.socket(socket.AF_UNIX) as holder,
    ):
        holder.connect(os.fspath(relay_dir / "a-5-full.sock"))
        async with trio.open_nursery() as nursery:
            await serve_fake_peer(nursery, relay_dir, "8-live")
            await serve_fake_peer(nursery, relay_dir, "9-other", answer_as="9-xxxx")
            gc.collect()
            before = set(os.listdir("/proc/self/fd"))
            run = functools.partial(
                discover_blocking, relay_dir, exclude_instance_id=None, io_timeout=0.2
            )
            peers = await trio.to_thread.run_sync(run)
            assert [p.manifest.instance_id for p in peers] == ["8-live"]
            await trio.testing.wait_all_tasks_blocked()
            assert set(os.listdir("/proc/self/fd")) - before == set()
            nursery.cancel_scope.cancel()
