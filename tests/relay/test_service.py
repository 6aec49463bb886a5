from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.relay.helpers import make_enqueue, register_sender, serve_fake_peer
from zcoder.config import RelaySettings
from zcoder.errors import RelayUnavailable
from zcoder.relay import client
from zcoder.relay import service as service_module
from zcoder.relay.endpoint import Endpoint
from zcoder.relay.listener import Listener
from zcoder.relay.registry import Manifest, load_manifest, remove_manifest
from zcoder.relay.service import RelayService
from zcoder.relay.spool.store import SpoolFault


def make_service(root: Path, relay_dir: Path | None = None, **overrides: Any) -> RelayService:
    settings = overrides.pop("settings", RelaySettings(dir=relay_dir or root / "agents"))
    runtime = root / "rt"
    runtime.mkdir(mode=0o700, exist_ok=True)
    args: dict[str, Any] = {
        "settings": settings,
        "settings_problem": "",
        "runtime_dir": runtime,
        "env": {},
        "project": "weekly-digest",
        "workspace": Path("/work/app/weekly-digest"),
        "profile": "coding",
        "model": "qwen3-coder",
        "session_id": "1788012120_10392",
    }
    args.update(overrides)
    return RelayService(**args)


def our_files(relay_dir: Path) -> list[str]:
    return sorted(n for n in os.listdir(relay_dir) if n.startswith("a-"))


def manifest_of(svc: RelayService, relay_dir: Path) -> Manifest:
    return load_manifest(relay_dir, svc.status().instance_id)


async def test_start_publishes_and_stop_cleans_up_in_order(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    relay_dir = short_tmp / "agents"
    events: list[str] = []
    real_remove, real_unlink = remove_manifest, Endpoint.unlink_socket

    class RecordingListener(Listener):
        async def serve(self, *args: Any, **kwargs: Any) -> None:
            try:
                await super().serve(*args, **kwargs)
            finally:
                events.append("listener stopped")

    def remove(path: Path) -> None:
        if path.exists():
            events.append("manifest removed")
        real_remove(path)

    def unlink(endpoint: Endpoint) -> None:
        if endpoint.socket_path.exists():
            events.append("socket unlinked")
        real_unlink(endpoint)

    monkeypatch.setattr(service_module, "Listener", RecordingListener)
    monkeypatch.setattr("zcoder.relay.service.remove_manifest", remove)
    monkeypatch.setattr(Endpoint, "unlink_socket", unlink)
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        status = svc.status()
        assert status.available and status.reason == "" and not status.paused
        iid = status.instance_id
        assert iid.startswith(f"{os.getpid()}-")
        m = manifest_of(svc, relay_dir)
        assert (m.project, m.workspace, m.profile, m.model, m.state) == (
            "weekly-digest",
            "/work/app/weekly-digest",
            "coding",
            "qwen3-coder",
            "ready",
        )
        assert stat.S_ISSOCK(os.lstat(relay_dir / f"a-{iid}.sock").st_mode)
        assert stat.S_IMODE(os.lstat(relay_dir).st_mode) == 0o700
        assert sorted(os.listdir(short_tmp / "rt" / "relay")) == [
            "done",
            "inbox",
            "processing",
            "quarantine",
            "sequence",
            "state",
        ]
        pong = await client.ping(
            relay_dir / f"a-{iid}.sock", target_instance_id=iid, sender_instance_id="1-test"
        )
        assert pong.status == "pong" and pong.state == "ready"
        (relay_dir / "a-9-other.json").write_text("{}")  # not ours: must survive
        (relay_dir / "notes").write_text("x")
        nursery.cancel_scope.cancel()
    events.append("spool gone" if not (short_tmp / "rt" / "relay").exists() else "spool left")
    assert events == ["manifest removed", "listener stopped", "socket unlinked", "spool gone"]
    assert sorted(os.listdir(relay_dir)) == ["a-9-other.json", "notes"]
    assert not svc.status().available


async def test_cleanup_is_idempotent_and_leaves_what_is_not_ours(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        iid = svc.status().instance_id
        (relay_dir / f"a-{iid}.json").unlink()  # someone removed our manifest
        sock = relay_dir / f"a-{iid}.sock"
        sock.unlink()
        sock.write_text("not a socket")  # and put a file where the socket was
        nursery.cancel_scope.cancel()
    assert sorted(os.listdir(relay_dir)) == [f"a-{iid}.sock"]
    assert sock.read_text() == "not a socket"
    assert relay_dir.is_dir()


async def test_enqueue_end_to_end_and_the_change_wait(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp)
    seen: list[tuple[bool, int]] = []

    async def watch() -> None:  # as the app does: await the one wait, look again
        count = 0
        while True:
            count = await svc.changes.wait(count)
            seen.append((svc.status().available, svc.status().queued))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await nursery.start(svc.run)
        await trio.testing.wait_all_tasks_blocked()
        assert seen[-1] == (True, 0)
        me = register_sender(relay_dir)
        iid = svc.status().instance_id
        env = make_enqueue(f"{me.instance_id}-1", target=iid, sender=me.instance_id, body="hi")
        ack = await client.send(relay_dir / f"a-{iid}.sock", env, io_timeout=2)
        assert (ack.status, ack.queue_position) == ("accepted", 1)
        await trio.testing.wait_all_tasks_blocked()
        assert seen[-1] == (True, 1) and svc.status().queued == 1
        assert svc.spool is not None
        claimed = svc.spool.claim()
        assert claimed is not None and claimed.envelope == env
        assert claimed.verified  # SO_PEERCRED: the connecting pid is the sender pid
        nursery.cancel_scope.cancel()
    assert (svc.status().available, svc.status().queued) == (False, 0)
    assert svc.spool is None


async def test_refresh_pause_and_resume_republish(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        iid = svc.status().instance_id
        sock = relay_dir / f"a-{iid}.sock"
        started_at = manifest_of(svc, relay_dir).started_at
        svc.refresh(model="llama3", session_id="s2", profile="sysadmin", state="busy")
        m = manifest_of(svc, relay_dir)
        assert (m.model, m.session_id, m.profile, m.state) == ("llama3", "s2", "sysadmin", "busy")
        assert m.started_at == started_at
        pong = await client.ping(sock, target_instance_id=iid, sender_instance_id="1-test")
        assert pong.state == "busy"
        svc.pause()
        assert svc.status().paused
        assert manifest_of(svc, relay_dir).state == "paused"
        me = register_sender(relay_dir)
        env = make_enqueue(f"{me.instance_id}-1", target=iid, sender=me.instance_id)
        assert (await client.send(sock, env, io_timeout=2)).status == "paused"
        svc.resume()
        assert manifest_of(svc, relay_dir).state == "busy"  # back to what it was
        assert (await client.send(sock, env, io_timeout=2)).status == "accepted"
        with pytest.raises(ValueError, match="cannot refresh"):
            svc.refresh(pid="1")
        with pytest.raises(ValueError, match="ready or busy"):
            svc.refresh(state="paused")
        nursery.cancel_scope.cancel()


async def test_paused_mode_starts_paused(short_tmp: Path) -> None:
    settings = RelaySettings(mode="paused", dir=short_tmp / "agents")
    svc = make_service(short_tmp, settings=settings)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        assert svc.status().available and svc.status().paused
        assert manifest_of(svc, short_tmp / "agents").state == "paused"
        nursery.cancel_scope.cancel()


async def test_a_failed_refresh_makes_the_relay_unavailable(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        svc.refresh(model="m" * 300)  # too long for a manifest: refused, relay goes down
        await trio.testing.wait_all_tasks_blocked()
        status = svc.status()
        assert not status.available
        assert "refusing to publish an invalid manifest: field model" in status.reason
        assert our_files(relay_dir) == []
        assert (short_tmp / "rt" / "relay").exists()  # accepted messages may still run
        svc.refresh(model="ok")  # harmless once unavailable
        nursery.cancel_scope.cancel()
    assert not (short_tmp / "rt" / "relay").exists()


async def test_listener_crash_leaves_the_app_running(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    relay_dir = short_tmp / "agents"
    crash = trio.Event()

    class CrashingListener(Listener):
        async def serve(
            self,
            listeners: list[trio.SocketListener],
            *,
            task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            task_status.started(listeners)
            await crash.wait()
            raise RuntimeError("listener exploded")

    monkeypatch.setattr(service_module, "Listener", CrashingListener)
    svc = make_service(short_tmp)
    ticks = 0

    async def app_task() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(1)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(app_task)
        await nursery.start(svc.run)
        assert svc.status().available
        crash.set()
        await trio.testing.wait_all_tasks_blocked()
        status = svc.status()
        assert not status.available
        assert status.reason == "the relay failed: listener exploded"
        assert our_files(relay_dir) == []
        before = ticks
        await trio.sleep(2.5)
        assert ticks > before  # the surrounding nursery is alive
        with pytest.raises(RelayUnavailable, match="listener exploded"):
            await svc.discover()  # nothing more is listed from a failed relay
        nursery.cancel_scope.cancel()
    assert not (short_tmp / "rt" / "relay").exists()


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("unsafe", "has mode 0750; group and other permission bits must be clear"),
        ("file", "is not a directory"),
        ("long", "bytes; this OS allows"),
        ("problem", "relay disabled: ZCODER_RELAY_MAX_QUEUE: '0' is not a whole number"),
        ("off", "the relay is off (ZCODER_RELAY=off)"),
        ("nosocket", "no Unix-domain socket support"),
    ],
)
async def test_unavailable_with_one_reason(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, setup: str, needle: str
) -> None:
    relay_dir = short_tmp / "agents"
    overrides: dict[str, Any] = {}
    if setup == "unsafe":
        relay_dir.mkdir(mode=0o750)
        os.chmod(relay_dir, 0o750)
    elif setup == "file":
        relay_dir.write_text("")
    elif setup == "long":
        relay_dir = short_tmp / ("d" * 100)
    elif setup == "problem":
        overrides["settings_problem"] = (
            "relay disabled: ZCODER_RELAY_MAX_QUEUE: '0' is not a whole number from 1 to 1024"
        )
    elif setup == "off":
        overrides["settings"] = RelaySettings(mode="off", dir=relay_dir)
    else:
        monkeypatch.delattr(socket, "AF_UNIX")
    svc = make_service(short_tmp, relay_dir, **overrides)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        status = svc.status()
        assert not status.available
        assert needle in status.reason
        assert status.queued == 0 and svc.spool is None
        assert not (short_tmp / "rt" / "relay").exists()
        if relay_dir.is_dir():
            assert our_files(relay_dir) == []
        if setup in ("problem", "off", "nosocket", "unsafe", "file"):
            with pytest.raises(RelayUnavailable) as info:
                await svc.discover()
            assert needle in str(info.value)
        nursery.cancel_scope.cancel()


async def test_discover_excludes_self(short_tmp: Path) -> None:
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        other = await serve_fake_peer(nursery, relay_dir, "77-peer", project="other")
        peers = await svc.discover()
        assert [p.manifest for p in peers] == [other]
        nursery.cancel_scope.cancel()


async def test_new_envelope_carries_this_instance(short_tmp: Path) -> None:
    svc = make_service(short_tmp)
    with pytest.raises(RelayUnavailable, match="has not started"):
        svc.new_envelope("77-peer", "hi")
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        iid = svc.status().instance_id
        first = svc.new_envelope("77-peer", "hi")
        second = svc.new_envelope("77-peer", "again")
        assert (first.message_id, second.message_id) == (f"{iid}-1", f"{iid}-2")
        assert first.sender_instance_id == iid and first.sender_pid == os.getpid()
        assert (first.sender_project, first.sender_workspace) == (
            "weekly-digest",
            "/work/app/weekly-digest",
        )
        assert svc.health.relay_dir == short_tmp / "agents"
        with pytest.raises(ValueError, match="body"):
            svc.new_envelope("77-peer", "   ")
        nursery.cancel_scope.cancel()


async def test_a_refused_send_gives_its_counter_to_the_next_and_after_skips_used_numbers(
    short_tmp: Path,
) -> None:
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        iid = svc.status().instance_id
        refused = svc.new_envelope("77-peer", "while it was paused")
        svc.refused(refused)  # no receiver stored it: the id is free again
        assert svc.new_envelope("77-peer", "again").message_id == f"{iid}-1"
        # A session whose sent list reached #6 goes on with #7, never a second #2.
        assert svc.new_envelope("77-peer", "next", after=6).message_id == f"{iid}-7"
        svc.refused(refused)  # not the last one given: nothing changes
        assert svc.new_envelope("77-peer", "last").message_id == f"{iid}-8"
        nursery.cancel_scope.cancel()


async def test_an_enqueue_received_from_an_unsafe_relay_dir_is_refused(short_tmp: Path) -> None:
    # The sender check reads the sender's manifest there: not once the directory is open.
    relay_dir = short_tmp / "agents"
    svc = make_service(short_tmp, scan_interval=3600)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        me = register_sender(relay_dir)
        iid = svc.status().instance_id
        env = make_enqueue(f"{me.instance_id}-1", target=iid, sender=me.instance_id, body="hi")
        os.chmod(relay_dir, 0o711)
        ack = await client.send(relay_dir / f"a-{iid}.sock", env, io_timeout=2)
        assert ack.status == "invalid" and svc.status().queued == 0
        status = svc.status()
        assert not status.available and "has mode 0711" in status.reason
        assert svc.health.problem == status.reason
        assert f"a-{iid}.json" not in our_files(relay_dir)  # withdrawn at once
        await trio.testing.wait_all_tasks_blocked()
        assert our_files(relay_dir) == [f"a-{me.instance_id}.json"]  # the socket went too
        nursery.cancel_scope.cancel()


async def test_fail_is_told_once_and_the_first_reason_wins(short_tmp: Path) -> None:
    svc = make_service(short_tmp)
    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        svc.health.fail("first")
        told = svc.changes.count
        svc.health.fail("second")
        assert svc.changes.count == told  # nothing new to tell
        await trio.testing.wait_all_tasks_blocked()
        assert svc.health.problem == "first" and svc.status().reason == "first"
        with pytest.raises(RelayUnavailable, match=r"^first$"):
            svc.health.check_dir()
        svc.pause()  # harmless once failed
        nursery.cancel_scope.cancel()


async def test_the_watch_tells_a_storage_fault_once(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = make_service(short_tmp, scan_interval=0.001)
    calls = []

    def refuse() -> None:
        calls.append(1)
        raise SpoolFault("cannot list the relay spool: Permission denied", damaged=False)

    async with trio.open_nursery() as nursery:
        await nursery.start(svc.run)
        assert svc.spool is not None
        monkeypatch.setattr(svc.spool, "scan", refuse)
        with trio.fail_after(10):
            while len(calls) < 5:  # noqa: ASYNC110
                await trio.sleep(0.001)
        assert svc.health.take_problems() == ["cannot list the relay spool: Permission denied"]
        assert svc.status().available
        nursery.cancel_scope.cancel()
