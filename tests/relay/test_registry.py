from __future__ import annotations

import gc
import json
import logging
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests.relay.helpers import make_enqueue, make_manifest, register_sender, serve_fake_peer
from zcoder.errors import RelayError
from zcoder.relay import registry
from zcoder.relay.discovery import discover
from zcoder.relay.listing import peer_record, peer_table
from zcoder.relay.paths import ensure_relay_dir
from zcoder.relay.registry import (
    MAX_MANIFEST_BYTES,
    MAX_MANIFESTS,
    Peer,
    load_manifest,
    publish_manifest,
    remove_manifest,
    sender_is_registered,
)

OTHER_UID = 4242


@pytest.fixture
def relay_dir(short_tmp: Path) -> Path:
    return ensure_relay_dir(short_tmp / "agents")


async def find(relay_dir: Path, exclude: str | None = None, io_timeout: float = 2.0) -> list[str]:
    peers = await discover(relay_dir, exclude_instance_id=exclude, io_timeout=io_timeout)
    return [p.manifest.instance_id for p in peers]


# -- publish, refresh, remove -------------------------------------------------------------


def test_publish_is_private_atomic_and_exact(relay_dir: Path) -> None:
    m = make_manifest(relay_dir, "42302-18473291", project="weekly-digest")
    path = relay_dir / "a-42302-18473291.json"
    publish_manifest(path, m)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    obj = json.loads(path.read_bytes())
    assert list(obj) == [
        "protocol",
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
    assert obj["protocol"] == 1 and obj["pid"] == 42302
    assert obj["socket"] == f"{relay_dir}/a-42302-18473291.sock"
    assert load_manifest(relay_dir, "42302-18473291") == m
    with open(path, "rb") as old:  # the old file stays whole: a rename replaced it
        before = old.read()
        publish_manifest(path, attrs.evolve(m, model="other", session_id="s2"))
        old.seek(0)
        assert old.read() == before
    assert load_manifest(relay_dir, "42302-18473291").model == "other"
    assert sorted(os.listdir(relay_dir)) == ["a-42302-18473291.json"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"state": "sleeping"}, "field state"),
        ({"socket": "/elsewhere/a-42302-18473291.sock"}, "not this instance's socket"),
        ({"pid": 7}, "pid differs"),
        ({"workspace": "relative"}, "field workspace"),
        ({"project": "x" * 257}, "field project"),
        ({"model": "bad\0"}, "field model"),
    ],
)
def test_publish_refuses_an_invalid_manifest(
    relay_dir: Path, change: dict[str, Any], needle: str
) -> None:
    path = relay_dir / "a-42302-18473291.json"
    good = make_manifest(relay_dir, "42302-18473291")
    publish_manifest(path, good)
    with pytest.raises(RelayError, match=needle):
        publish_manifest(path, attrs.evolve(good, **change))
    assert load_manifest(relay_dir, "42302-18473291") == good
    assert sorted(os.listdir(relay_dir)) == ["a-42302-18473291.json"]


def test_publish_refuses_a_path_for_another_id(relay_dir: Path) -> None:
    with pytest.raises(RelayError, match="does not match its instance id"):
        publish_manifest(relay_dir / "a-1-abcd.json", make_manifest(relay_dir, "2-abcd"))


def test_remove_manifest_checks_name_type_and_owner(relay_dir: Path) -> None:
    path = relay_dir / "a-1-abcd.json"
    publish_manifest(path, make_manifest(relay_dir, "1-abcd"))
    remove_manifest(path)
    assert not path.exists()
    remove_manifest(path)  # idempotent
    with pytest.raises(RelayError, match="not a manifest name"):
        remove_manifest(relay_dir / "notes.json")
    with pytest.raises(RelayError, match="not a manifest name"):
        remove_manifest(relay_dir / "a-..json")
    target = relay_dir / "keep.txt"
    target.write_text("x")
    (relay_dir / "a-2-abcd.json").symlink_to(target)
    with pytest.raises(RelayError, match="not our own regular file"):
        remove_manifest(relay_dir / "a-2-abcd.json")
    assert os.path.islink(relay_dir / "a-2-abcd.json") and target.read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_remove_manifest_leaves_another_owners_file(relay_dir: Path) -> None:
    path = relay_dir / "a-1-abcd.json"
    publish_manifest(path, make_manifest(relay_dir, "1-abcd"))
    os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(RelayError, match="not our own regular file"):
        remove_manifest(path)
    assert path.exists()


# -- discovery ------------------------------------------------------------------------------


async def test_discovers_live_peers_and_excludes_self(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await serve_fake_peer(nursery, relay_dir, "100-aaaa", project="alpha")
        b = await serve_fake_peer(nursery, relay_dir, "200-bbbb", project="beta", state="busy")
        peers = await discover(relay_dir, exclude_instance_id=None, io_timeout=2)
        assert peers == [Peer(a, "ready"), Peer(b, "busy")]
        assert await find(relay_dir, exclude="100-aaaa") == ["200-bbbb"]
        nursery.cancel_scope.cancel()


async def test_state_comes_from_the_ping_not_the_manifest(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa", state="paused")
        assert m.state == "ready"
        [peer] = await discover(relay_dir, exclude_instance_id=None, io_timeout=2)
        assert peer.state == "paused" and peer.manifest.state == "ready"
        nursery.cancel_scope.cancel()


async def test_equal_basenames_stay_distinguishable(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "300-aaaa", project="api", workspace="/b/api")
        await serve_fake_peer(nursery, relay_dir, "200-bbbb", project="api", workspace="/a/api")
        peers = await discover(relay_dir, exclude_instance_id=None, io_timeout=2)
        assert [(p.manifest.pid, p.manifest.workspace) for p in peers] == [
            (200, "/a/api"),
            (300, "/b/api"),
        ]
        table = peer_table(peers).splitlines()
        assert table[3].endswith("/a/api") and table[5].endswith("/b/api")
        nursery.cancel_scope.cancel()


async def test_sorted_by_project_case_insensitively_then_pid(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        for iid, project in [
            ("500-aaaa", "beta"),
            ("400-aaaa", "Alpha"),
            ("30-aaaa", "alpha"),
            ("9-aaaa", "Beta"),
            ("700-aaaa", "_zeta"),
        ]:
            await serve_fake_peer(nursery, relay_dir, iid, project=project)
        assert await find(relay_dir) == ["700-aaaa", "30-aaaa", "400-aaaa", "9-aaaa", "500-aaaa"]
        nursery.cancel_scope.cancel()


async def test_missing_dir_has_no_peers(short_tmp: Path) -> None:
    assert await find(short_tmp / "absent") == []


async def test_stale_entries_are_skipped(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "100-live")
        # manifest whose socket does not exist
        publish_manifest(relay_dir / "a-101-gone.json", make_manifest(relay_dir, "101-gone"))
        # manifest whose socket path is a regular file
        publish_manifest(relay_dir / "a-102-file.json", make_manifest(relay_dir, "102-file"))
        (relay_dir / "a-102-file.sock").write_text("")
        # a socket file left behind by a dead listener: bound, nobody listening
        dead = socket.socket(socket.AF_UNIX)
        dead.bind(os.fspath(relay_dir / "a-103-dead.sock"))
        dead.close()
        publish_manifest(relay_dir / "a-103-dead.json", make_manifest(relay_dir, "103-dead"))
        assert await find(relay_dir) == ["100-live"]
        nursery.cancel_scope.cancel()


async def test_pid_reuse_another_listener_on_the_socket(relay_dir: Path) -> None:
    # The manifest names a live pid (ours) but its socket is served by another instance.
    me = f"{os.getpid()}-old1"
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, me, answer_as=f"{os.getpid()}-new2")
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


async def test_pid_reuse_socket_that_never_answers(relay_dir: Path) -> None:
    mute = socket.socket(socket.AF_UNIX)
    mute.bind(os.fspath(relay_dir / f"a-{os.getpid()}-mute.sock"))
    mute.listen(4)  # accepts connections in the backlog, never answers
    try:
        publish_manifest(
            relay_dir / f"a-{os.getpid()}-mute.json",
            make_manifest(relay_dir, f"{os.getpid()}-mute"),
        )
        assert await find(relay_dir, io_timeout=0.3) == []
    finally:
        mute.close()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"protocol": 1}',
        b"\xff\xfe",
        b'{"protocol": NaN}',
    ],
)
async def test_malformed_manifests_are_skipped(relay_dir: Path, content: bytes) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        (relay_dir / "a-100-aaaa.json").write_bytes(content)
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda o: o.pop("model"),
        lambda o: o.update(extra=1, model=None),  # a new key does not excuse a bad known one
        lambda o: o.update(pid="100"),
        lambda o: o.update(pid=True),
        lambda o: o.update(protocol=2),
        lambda o: o.update(instance_id="100-bbbb"),
        lambda o: o.update(socket="/tmp/a-100-aaaa.sock"),
        lambda o: o.update(started_at=1.5),
        lambda o: o.update(project="\ud800"),
    ],
)
async def test_inconsistent_manifests_are_skipped(relay_dir: Path, mutate: object) -> None:
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        obj = attrs.asdict(m)
        mutate(obj)  # type: ignore[operator]
        (relay_dir / "a-100-aaaa.json").write_text(json.dumps(obj))
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


async def test_unknown_manifest_keys_are_ignored(relay_dir: Path) -> None:
    """A newer peer's manifest: the version-1 fields checked, the others ignored."""
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        obj = {**attrs.asdict(m), "agent_name": "digest", "caps": ["receipts"], "n": {"a": 1}}
        (relay_dir / "a-100-aaaa.json").write_text(json.dumps(obj))
        [peer] = await discover(relay_dir, exclude_instance_id=None, io_timeout=2)
        assert peer.manifest == m
        assert list(peer_record(peer)) == [k for k in attrs.asdict(m) if k != "protocol"]
        nursery.cancel_scope.cancel()


def test_the_zsh_manifest_is_accepted(relay_dir: Path) -> None:
    """The other implementation's manifest: compact, no trailing newline, mode 0644, a
    20-digit nonce, profile/model/session id it does not validate (empty ones too)."""
    iid = "13565-17960041672724223065"
    socket_path = os.fspath(relay_dir / f"a-{iid}.sock")
    text = (
        f'{{"protocol":1,"instance_id":"{iid}","pid":13565,"project":"weekly-digest",'
        '"workspace":"/work/app/services/weekly-digest","session_id":"","profile":"",'
        f'"model":"qwen3-coder:30b-a3b-q4_K_M","socket":"{socket_path}","state":"busy",'
        '"started_at":1788012102}'
    )
    path = relay_dir / f"a-{iid}.json"
    path.write_bytes(text.encode())
    os.chmod(path, 0o644)
    m = load_manifest(relay_dir, iid)
    assert (m.instance_id, m.pid, m.socket, m.session_id, m.state) == (
        iid,
        13565,
        socket_path,
        "",
        "busy",
    )


async def test_each_dropped_candidate_is_logged_once(
    relay_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="zcoder.relay.registry")
    evil = "a-\x1b[2J" + "x" * 200 + ".json"
    (relay_dir / evil).write_text("{}")
    (relay_dir / "a-1-nosock.json").write_text("{}")
    (relay_dir / "a-2-resv.json").write_bytes(b"")
    (relay_dir / "a-2-resv.sock").write_bytes(b"")
    publish_manifest(relay_dir / "a-9-file.json", make_manifest(relay_dir, "9-file"))
    (relay_dir / "a-9-file.sock").write_bytes(b"")  # not a socket: lstat says so
    publish_manifest(relay_dir / "a-3-dead.json", make_manifest(relay_dir, "3-dead"))
    _dead_socket(relay_dir, "3-dead")
    mute = _mute_listener(relay_dir, "4-mute")
    publish_manifest(relay_dir / "a-4-mute.json", make_manifest(relay_dir, "4-mute"))
    junk = _mute_listener(relay_dir, "5-junk")
    (relay_dir / "a-5-junk.json").write_text('{"protocol": 1}')
    try:
        async with trio.open_nursery() as nursery:
            await serve_fake_peer(nursery, relay_dir, "6-other", answer_as="6-xxxx")
            await serve_fake_peer(nursery, relay_dir, "7-live")
            await serve_fake_peer(nursery, relay_dir, "8-self")
            assert await find(relay_dir, exclude="8-self", io_timeout=0.3) == ["7-live"]
            nursery.cancel_scope.cancel()
    finally:
        mute.close()
        junk.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "zcoder.relay.registry"]
    assert all(line.startswith("relay discovery dropped ") for line in lines), lines
    assert all(len(line) <= 300 and "\x1b" not in line for line in lines), lines
    why = {
        "^[[2J": "no valid instance id",  # the one visible form of control characters
        "a-1-nosock.json": "no socket",
        "a-2-resv.json": "a reserved name",
        "a-9-file.json": "its socket is not a socket of ours",
        "a-3-dead.json": "nobody listens",
        "a-4-mute.json": "no answer to the ping within 0.3 s",
        "a-5-junk.json": "version-1 fields missing",
        "a-6-other.json": "answered wrong_target",
    }
    assert len(lines) == len(why), lines
    for name, reason in why.items():
        [line] = [line for line in lines if name in line]
        assert reason in line, line


async def test_duplicate_keys_are_malformed(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        text = json.dumps(attrs.asdict(m))
        (relay_dir / "a-100-aaaa.json").write_text(text[:-1] + ', "state": "busy"}')
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


async def test_symlinked_manifest_is_skipped(relay_dir: Path, short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        os.rename(relay_dir / "a-100-aaaa.json", short_tmp / "elsewhere.json")
        (relay_dir / "a-100-aaaa.json").symlink_to(short_tmp / "elsewhere.json")
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
async def test_other_owners_manifest_is_skipped(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        await serve_fake_peer(nursery, relay_dir, "200-bbbb")
        os.chown(relay_dir / "a-100-aaaa.json", OTHER_UID, OTHER_UID)
        os.chown(relay_dir / "a-200-bbbb.sock", OTHER_UID, OTHER_UID)
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


async def test_size_bound(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        text = json.dumps(attrs.asdict(m))
        path = relay_dir / "a-100-aaaa.json"
        path.write_text(text + " " * (MAX_MANIFEST_BYTES - len(text)))
        assert await find(relay_dir) == ["100-aaaa"]
        path.write_text(text + " " * (MAX_MANIFEST_BYTES - len(text) + 1))
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


def _mute_listener(relay_dir: Path, instance_id: str) -> socket.socket:
    """A socket of ours that accepts connections into its backlog and never answers."""
    mute = socket.socket(socket.AF_UNIX)
    mute.bind(os.fspath(relay_dir / f"a-{instance_id}.sock"))
    mute.listen(4)
    return mute


def _dead_socket(relay_dir: Path, instance_id: str) -> None:
    """The socket file a crashed listener leaves behind: connecting is refused."""
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(os.fspath(relay_dir / f"a-{instance_id}.sock"))


async def test_stale_manifests_sorting_first_do_not_hide_live_peers(relay_dir: Path) -> None:
    # The reported failure: 32 live peers behind 128 stale manifests found 0 peers, because
    # the first 128 names were kept before any was checked. Here: 3 live peers behind
    # 2 * MAX_MANIFESTS valid manifests of dead instances, half of them with the socket file
    # a crash leaves behind, half without a socket.
    for i in range(2 * MAX_MANIFESTS):
        stale = f"1-st{i:04d}"
        publish_manifest(relay_dir / f"a-{stale}.json", make_manifest(relay_dir, stale))
        if i % 2:
            _dead_socket(relay_dir, stale)
    before = sorted(os.listdir(relay_dir))
    async with trio.open_nursery() as nursery:
        for pid in (900, 901, 902):
            await serve_fake_peer(nursery, relay_dir, f"{pid}-live")
        assert await find(relay_dir) == ["900-live", "901-live", "902-live"]
        nursery.cancel_scope.cancel()
    live_files = {f"a-{pid}-live.{ext}" for pid in (900, 901, 902) for ext in ("json", "sock")}
    after = sorted(set(os.listdir(relay_dir)) - live_files)
    assert after == before  # discovery is read-only: stale files stay where they are


async def test_manifest_bound_counts_listening_candidates_only(relay_dir: Path) -> None:
    assert MAX_MANIFESTS == 128
    # 128 names sorting first with a listening socket: each uses up one of the 128 reads
    # (their manifests are junk, so none is pinged) and the live peer is never read.
    mutes = [_mute_listener(relay_dir, f"1-m{i:04d}") for i in range(MAX_MANIFESTS)]
    try:
        for i in range(MAX_MANIFESTS):
            (relay_dir / f"a-1-m{i:04d}.json").write_text("{}")
        async with trio.open_nursery() as nursery:
            await serve_fake_peer(nursery, relay_dir, "9-live")
            assert await find(relay_dir) == []  # the 129th candidate is never read
            assert await find(relay_dir, exclude="1-m0000") == ["9-live"]  # ours: no count
            mutes.pop().close()  # its socket file stays, but nobody listens any more
            assert await find(relay_dir) == ["9-live"]
            (relay_dir / "a-1-m0000.sock").unlink()
            assert await find(relay_dir, exclude="1-m0001") == ["9-live"]
            # names that are not a-<id>.json, or without a socket next to them, cost nothing
            for i in range(200):
                (relay_dir / f"b-{i}.json").write_text("{}")
                (relay_dir / f"a-2-x{i:04d}.json").write_text("{}")
            (relay_dir / "a-1-m0001.txt").write_text("{}")
            assert await find(relay_dir) == ["9-live"]
            nursery.cancel_scope.cancel()
    finally:
        for mute in mutes:
            mute.close()


async def test_directory_entry_bound(relay_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with trio.open_nursery() as nursery:
        await serve_fake_peer(nursery, relay_dir, "9-live")  # two entries: .json and .sock
        monkeypatch.setattr(registry, "MAX_DIR_ENTRIES", 2)
        assert await find(relay_dir) == ["9-live"]
        monkeypatch.setattr(registry, "MAX_DIR_ENTRIES", 1)  # the pair is never seen whole
        assert await find(relay_dir) == []
        nursery.cancel_scope.cancel()


async def test_reservation_and_wrong_types_are_skipped_before_reading(relay_dir: Path) -> None:
    async with trio.open_nursery() as nursery:
        m = await serve_fake_peer(nursery, relay_dir, "100-aaaa")
        path = relay_dir / "a-100-aaaa.json"
        path.write_bytes(b"")  # an id reserved, its manifest not yet published
        assert await find(relay_dir) == []
        path.unlink()
        path.mkdir()  # a directory under a manifest name
        assert await find(relay_dir) == []
        path.rmdir()
        publish_manifest(path, m)
        assert await find(relay_dir) == ["100-aaaa"]
        nursery.cancel_scope.cancel()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_discovery_closes_every_connection(relay_dir: Path) -> None:
    mute = _mute_listener(relay_dir, "5-mute")  # connects, never answers: times out
    (relay_dir / "a-5-mute.json").write_text("{}")  # ... and its manifest is junk
    publish_manifest(relay_dir / "a-6-mute.json", make_manifest(relay_dir, "6-mute"))
    mute6 = _mute_listener(relay_dir, "6-mute")  # valid manifest, never answers
    _dead_socket(relay_dir, "7-dead")
    publish_manifest(relay_dir / "a-7-dead.json", make_manifest(relay_dir, "7-dead"))
    try:
        async with trio.open_nursery() as nursery:
            await serve_fake_peer(nursery, relay_dir, "8-live")
            await serve_fake_peer(nursery, relay_dir, "9-other", answer_as="9-xxxx")
            gc.collect()  # earlier tests' garbage must not close descriptors meanwhile
            before = set(os.listdir("/proc/self/fd"))
            assert await find(relay_dir, io_timeout=0.2) == ["8-live"]
            await trio.testing.wait_all_tasks_blocked()  # the fake peers finish their side
            assert set(os.listdir("/proc/self/fd")) - before == set()
            nursery.cancel_scope.cancel()
    finally:
        mute.close()
        mute6.close()


# -- sender check ---------------------------------------------------------------------------


def test_sender_check_accepts_a_registered_live_sender(relay_dir: Path) -> None:
    me = register_sender(relay_dir)
    assert sender_is_registered(relay_dir, make_enqueue("m-1", sender=me.instance_id))


def test_sender_check_needs_a_manifest(relay_dir: Path) -> None:
    sender = f"{os.getpid()}-nomanifest"
    assert not sender_is_registered(relay_dir, make_enqueue("m-1", sender=sender))
    (relay_dir / f"a-{sender}.json").write_text("")  # a reservation, not yet published
    assert not sender_is_registered(relay_dir, make_enqueue("m-1", sender=sender))


def test_sender_check_refuses_a_dead_process(relay_dir: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    sender = f"{child.pid}-dead"
    publish_manifest(relay_dir / f"a-{sender}.json", make_manifest(relay_dir, sender))
    assert not sender_is_registered(relay_dir, make_enqueue("m-1", sender=sender))


def test_sender_check_refuses_a_mismatched_pid(relay_dir: Path) -> None:
    me = register_sender(relay_dir)
    forged = attrs.evolve(make_enqueue("m-1", sender=me.instance_id))
    object.__setattr__(forged, "sender_pid", os.getpid() + 1)  # bypass the envelope check
    assert not sender_is_registered(relay_dir, forged)


def test_sender_check_refuses_symlinked_and_malformed_manifests(
    relay_dir: Path, short_tmp: Path
) -> None:
    me = register_sender(relay_dir)
    path = relay_dir / f"a-{me.instance_id}.json"
    os.rename(path, short_tmp / "m.json")
    path.symlink_to(short_tmp / "m.json")
    assert not sender_is_registered(relay_dir, make_enqueue("m-1", sender=me.instance_id))
    path.unlink()
    path.write_text('{"protocol": 1}')
    assert not sender_is_registered(relay_dir, make_enqueue("m-1", sender=me.instance_id))


# -- rendering -----------------------------------------------------------------------------


def test_peer_record_fields(relay_dir: Path) -> None:
    m = make_manifest(relay_dir, "1-abcd")
    assert peer_record(Peer(m, "busy")) == {
        "instance_id": "1-abcd",
        "pid": 1,
        "project": "proj",
        "workspace": "/work/proj",
        "session_id": "1788012120_10392",
        "profile": "coding",
        "model": "qwen3-coder",
        "socket": f"{relay_dir}/a-1-abcd.sock",
        "state": "busy",
        "started_at": 1788012102,
    }
