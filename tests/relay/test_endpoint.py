"""The endpoint heals itself: real relay services on real sockets, their socket file or
manifest deleted or replaced as a tmp cleaner or a person would. Healing is counted in
looks of the health watch (one per scan interval): it happens at the first look after the
damage."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.relay.test_service import make_service
from zcoder.errors import RelayTransportError, RelayUnavailable
from zcoder.relay import client, wire
from zcoder.relay import endpoint as endpoint_module
from zcoder.relay.envelope import Ping, encode_envelope
from zcoder.relay.protocol import encode_frame
from zcoder.relay.registry import load_manifest
from zcoder.relay.service import RelayService

INTERVAL = 0.05


class Looks:
    """Counts the health watch's looks at the endpoint (the service's ``_heal``)."""

    def __init__(self, svc: RelayService) -> None:
        self.count = 0
        heal = svc._heal

        async def counted() -> None:
            self.count += 1
            await heal()

        svc._heal = counted  # type: ignore[method-assign]  # read when the watch starts


async def until(check: Callable[[], bool]) -> None:
    with trio.fail_after(10):
        while not check():  # noqa: ASYNC110
            await trio.sleep(INTERVAL / 10)


@asynccontextmanager
async def two(root: Path) -> AsyncIterator[tuple[RelayService, RelayService, Looks]]:
    """``a`` (watched every ``INTERVAL``, its looks counted) and ``b``, another instance."""
    (root / "b").mkdir()
    a = make_service(root, scan_interval=INTERVAL)
    b = make_service(root / "b", relay_dir=root / "agents", project="other")
    looks = Looks(a)
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run)
        await nursery.start(b.run)
        yield a, b, looks
        nursery.cancel_scope.cancel()


async def seen_by(b: RelayService, a: RelayService) -> bool:
    """``b`` discovers ``a``: its manifest is there, its socket answers a ping."""
    return a.instance_id in [p.manifest.instance_id for p in await b.discover()]


async def ping(path: Path, a: RelayService) -> str:
    ack = await client.ping(path, target_instance_id=a.instance_id, sender_instance_id="1-test")
    return ack.status


async def healed_after(looks: Looks, b: RelayService, a: RelayService) -> int:
    """The looks from now until ``b`` discovers ``a`` again."""
    before = looks.count
    with trio.fail_after(10):
        while not await seen_by(b, a):  # noqa: ASYNC110
            await trio.sleep(INTERVAL / 10)
    return looks.count - before


def paths(root: Path, a: RelayService) -> tuple[Path, Path]:
    relay_dir = root / "agents"
    return relay_dir / f"a-{a.instance_id}.sock", relay_dir / f"a-{a.instance_id}.json"


async def test_a_deleted_socket_is_bound_again_at_the_next_look(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, b, looks):
        sock, _ = paths(short_tmp, a)
        assert await seen_by(b, a)
        inode = os.lstat(sock).st_ino
        sock.unlink()
        with pytest.raises(RelayTransportError):
            await ping(sock, a)
        assert not await seen_by(b, a)  # a manifest whose socket is gone is not listed
        assert await healed_after(looks, b, a) <= 1
        assert await ping(sock, a) == "pong"
        assert stat.S_ISSOCK(os.lstat(sock).st_mode) and os.lstat(sock).st_ino != inode
        assert a.status().available and a.health.problem == ""
    assert not sock.exists()  # the new socket goes on shut-down like the first


async def test_a_deleted_manifest_is_published_again_at_the_next_look(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, b, looks):
        _, manifest = paths(short_tmp, a)
        before = load_manifest(short_tmp / "agents", a.instance_id)
        manifest.unlink()
        assert not await seen_by(b, a)
        assert await healed_after(looks, b, a) <= 1
        assert load_manifest(short_tmp / "agents", a.instance_id) == before
    assert not manifest.exists()


async def test_a_rewritten_manifest_is_published_again(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, b, looks):
        _, manifest = paths(short_tmp, a)
        manifest.write_text("{}")  # someone edited it in place
        assert not await seen_by(b, a)
        assert await healed_after(looks, b, a) <= 1
        assert load_manifest(short_tmp / "agents", a.instance_id).project == "weekly-digest"


async def test_both_deleted_come_back_together(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, b, looks):
        sock, manifest = paths(short_tmp, a)
        sock.unlink()
        manifest.unlink()
        assert await healed_after(looks, b, a) <= 1
        sock.unlink()  # and again: as often as it happens
        assert await healed_after(looks, b, a) <= 1
        assert a.status().available


async def test_a_connection_the_old_socket_accepted_is_still_answered(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, b, looks):
        sock, _ = paths(short_tmp, a)
        request = Ping(1, "ping", "1-test-ping-1", a.instance_id, "1-test")
        frame = encode_frame(encode_envelope(request), max_bytes=65536)
        conn = await wire.connect(sock)
        await wire.send_all(conn, frame[:10])  # the rest comes after the healing
        sock.unlink()
        assert await healed_after(looks, b, a) <= 1
        pending = client.PendingPing(conn, request, frame[10:])
        with trio.fail_after(5):
            assert (await client.finish_ping(pending)).status == "pong"


async def test_a_file_put_in_the_sockets_place_is_left_and_the_relay_fails(
    short_tmp: Path,
) -> None:
    async with two(short_tmp) as (a, b, looks):
        sock, manifest = paths(short_tmp, a)
        sock.unlink()
        sock.write_text("someone's notes")  # not made by this instance
        await until(lambda: not a.status().available)
        reason = a.status().reason
        assert reason == a.health.problem
        assert f"socket '{sock}' was replaced by a regular file" in reason
        assert "left in place" in reason
        assert not manifest.exists()  # withdrawn: never advertised without its socket
        assert not await seen_by(b, a)
        assert looks.count == 1  # failed at the first look
    assert sock.read_text() == "someone's notes"


async def test_another_socket_in_its_place_is_not_ours_either(short_tmp: Path) -> None:
    async with two(short_tmp) as (a, _b, _looks):
        sock, manifest = paths(short_tmp, a)
        sock.unlink()
        other = await wire.open_unix_listener(sock)  # another process's, say
        try:
            await until(lambda: not a.status().available)
            assert "was replaced by another socket" in a.status().reason
        finally:
            await other.aclose()
        assert not manifest.exists()
    assert stat.S_ISSOCK(os.lstat(sock).st_mode)  # left in place
    sock.unlink()


async def test_a_socket_that_cannot_be_bound_again_fails_the_relay(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuse(path: Path) -> object:
        raise RelayUnavailable(f"cannot listen on {path}: Permission denied")

    monkeypatch.setattr(endpoint_module, "open_unix_listener", refuse)
    async with two(short_tmp) as (a, b, _looks):
        sock, manifest = paths(short_tmp, a)
        sock.unlink()
        await until(lambda: not a.status().available)
        assert a.status().reason == (
            f"cannot bind the removed socket again: cannot listen on {sock}: Permission denied"
        )
        assert not manifest.exists() and not await seen_by(b, a)


async def test_a_refresh_never_publishes_a_manifest_whose_socket_is_gone(
    short_tmp: Path,
) -> None:
    svc = make_service(short_tmp, scan_interval=3600.0)  # no look during the test
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        sock, manifest = paths(short_tmp, svc)
        sock.unlink()
        manifest.unlink()
        svc.refresh(model="other-model")
        assert not manifest.exists()
        await svc._heal()  # what the next look does: the socket first, then the manifest
        assert load_manifest(short_tmp / "agents", svc.instance_id).model == "other-model"
        nursery.cancel_scope.cancel()
