"""Relay benchmark: round trips, discovery and idle cost. Run ``python bench/relay.py``.

Prints percentiles of ping and enqueue round trips between two processes (zcoder's client
and listener with the real spool and sender check), the same against a minimal blocking
``socket`` server in another process (the baseline; enqueue writes a file by temp +
rename), zcoder's listener again with the baseline's blocking client and with a client on
Trio's streams (what ``wire``'s non-blocking client path saves), ratios to
the baseline, discovery time with 1, 8 and 32 live peers and with 128
stale manifests added, the CPU a listening service uses while idle for 2 s, and the
enqueue round trip while 100 connections stall (each sent part of a header and waits), and
the receipt latency: from the moment a receiver's relayed turn ends (``ReceiptSender.send``)
to the sender's transcript entry (its listener took the receipt through ``RelayOutbox``),
both ends in this process on real sockets, with the real sender check and peer credentials;
and that latency again while a mute sender (it accepts the connection and never answers)
has a receipt queued just before each one (receipts go per destination: it costs nothing).

Then the listener of a real interactive zcoder, idle and while relayed turns run, beside a
plain-Python listener pinged in the same rounds (``bench/busy.py``).

``python bench/relay.py stalled``, ``python bench/relay.py receipts`` and ``python
bench/relay.py busy`` print only that figure. The child processes are
this file run with a role argument (``serve-zcoder``, ``serve-baseline``, ``serve-peers``),
importing this checkout's ``src`` whatever is installed; they print ``ready`` and serve
until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import trio

from zcoder.app.relay.receipts import ReceiptSender
from zcoder.relay import client
from zcoder.relay.changes import Changes
from zcoder.relay.discovery import discover
from zcoder.relay.envelope import Enqueue, Limits, decode_ack
from zcoder.relay.extension import ExtensionIntake
from zcoder.relay.listener import Listener, open_unix_listener
from zcoder.relay.paths import reserve_instance
from zcoder.relay.protocol import FrameDecoder
from zcoder.relay.registry import Manifest, publish_manifest, sender_is_registered
from zcoder.relay.spool.store import Spool

REQUESTS = 2000
WARMUP = 200
DISCOVERY_RUNS = 100
_HERE = Path(__file__).resolve()


# -- the processes under test ------------------------------------------------------------


def manifest_for(relay_dir: Path, instance_id: str, project: str) -> Manifest:
    return Manifest(
        protocol=1,
        instance_id=instance_id,
        pid=int(instance_id.split("-", 1)[0]),
        project=project,
        workspace=f"/work/{project}",
        session_id="1788012120_10392",
        profile="coding",
        model="qwen3-coder",
        socket=os.fspath(relay_dir / f"a-{instance_id}.sock"),
        state="ready",
        started_at=int(time.time()),
    )


async def serve_zcoder(relay_dir: Path, spool_root: Path, count: int) -> None:
    """``count`` instances in this process, each with its listener, spool and manifest; a
    drainer claims and completes accepted messages as the foreground would."""
    async with trio.open_nursery() as nursery:
        for n in range(count):
            reservation = reserve_instance(relay_dir)
            # The accept loop serves up to 16 connections between checkpoints: a sender as
            # fast as this one gets that far ahead of the drainer.
            spool = Spool(spool_root / reservation.instance_id, max_queue=64)
            spool.create()
            listener = Listener(
                instance_id=reservation.instance_id,
                spool=spool,
                sender_check=lambda env: sender_is_registered(relay_dir, env),
                state=lambda: "ready",
                limits=Limits(),
                io_timeout=2.0,
            )
            trio_listener = await open_unix_listener(reservation.socket_path)
            await nursery.start(listener.serve, [trio_listener])
            manifest = manifest_for(relay_dir, reservation.instance_id, f"peer{n}")
            publish_manifest(reservation.manifest_path, manifest)
            nursery.start_soon(drain, spool)
            print(reservation.instance_id, flush=True)
        print("ready", flush=True)


async def drain(spool: Spool) -> None:
    while True:
        await spool.wait_for_work()
        claimed = spool.claim()
        if claimed is not None:
            spool.complete(claimed)


def read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def baseline_answer(payload: bytes, spool: Path) -> bytes:
    request = json.loads(payload)
    if request["type"] == "ping":
        ack = {"protocol": 1, "type": "ack", "message_id": request["message_id"]}
        ack.update(status="pong", state="ready")
    else:
        temp = spool / f".tmp-{secrets.token_hex(8)}"
        temp.write_bytes(payload)
        temp.rename(spool / f"{request['message_id']}.json")
        ack = {"protocol": 1, "type": "ack", "message_id": request["message_id"]}
        ack.update(status="accepted", queue_position=1)
    body = json.dumps(ack, separators=(",", ":")).encode()
    return b"ZCODER-AGENT/1 %d\n%s" % (len(body), body)


def serve_baseline(path: Path, spool: Path) -> None:
    """A minimal blocking server: one connection at a time, no validation beyond JSON."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(os.fspath(path))
    server.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            header = b""
            while not header.endswith(b"\n"):
                header += read_exact(conn, 1)
            payload = read_exact(conn, int(header.split(b" ")[1]))
            conn.sendall(baseline_answer(payload, spool))


@contextmanager
def child(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """Start this file with ``args``; yield it and the lines it printed before ``ready``."""
    # This checkout's zcoder, whatever is installed (an editable install may point at
    # another checkout), as bench/startup.py and bench/busy.py run theirs.
    src = os.fspath(_HERE.parents[1] / "src")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (src, os.environ.get("PYTHONPATH")))),
    }
    proc = subprocess.Popen(
        [sys.executable, os.fspath(_HERE), *args], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while (line := proc.stdout.readline().strip()) != "ready":
            if not line:
                raise RuntimeError(f"child {args} failed to start")
            lines.append(line)
        yield proc, lines
    finally:
        proc.kill()
        proc.wait()


# -- measurements --------------------------------------------------------------------------


def blocking_request(path: Path, frame: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        sock.sendall(frame)
        header = b""
        while not header.endswith(b"\n"):
            header += read_exact(sock, 1)
        return read_exact(sock, int(header.split(b" ")[1]))


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


Request = Callable[[int], Awaitable[object]]


async def interleaved(requests: dict[str, Request]) -> dict[str, list[float]]:
    """Round-robin in a fresh random order each round, so that every variant sees the
    same machine load (the host is shared); the first ``WARMUP`` rounds are not kept."""
    names = list(requests)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(-WARMUP, REQUESTS):
        random.shuffle(names)
        for name in names:
            start = time.perf_counter()
            await requests[name](i)
            if i >= 0:
                samples[name].append(time.perf_counter() - start)
    return samples


def envelope(sender: str, target: str, n: int) -> Enqueue:
    return Enqueue(
        protocol=1,
        type="enqueue",
        message_id=client.new_message_id(sender, n),
        target_instance_id=target,
        sender_instance_id=sender,
        sender_pid=os.getpid(),
        sender_project="bench",
        sender_workspace="/work/bench",
        body="Update weeklyDigest.ts for users.display_name and run its focused tests.",
        created_at=int(time.time()),
    )


def frame_of(obj: object) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return b"ZCODER-AGENT/1 %d\n%s" % (len(body), body)


def ms(value: float) -> str:
    return f"{value * 1000:.3f} ms"


def cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` (nanosecond schedstat when present, else clock ticks)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float = 2.0) -> float:
    time.sleep(0.5)  # let the last connections finish
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


@attrs.frozen
class Servers:
    sender: str  # our instance id, registered so that the sender check passes
    target: str
    zcoder: Path
    baseline: Path
    zcoder_pid: int
    baseline_pid: int


def variants(kind: str, srv: Servers) -> dict[str, Request]:
    """The same request four ways: baseline, zcoder with its own client, zcoder with the
    baseline's blocking client (isolating the server), zcoder with a client on Trio's
    streams (is ``wire``'s non-blocking client path worth keeping?)."""
    ids = itertools.count(1)

    def frame(i: int) -> bytes:
        if kind == "ping":
            fields = {"protocol": 1, "type": "ping", "message_id": f"{srv.sender}-p"}
            return frame_of(
                {**fields, "target_instance_id": srv.target, "sender_instance_id": srv.sender}
            )
        return frame_of(attrs.asdict(envelope(srv.sender, srv.target, next(ids))))

    async def baseline(i: int) -> object:
        return blocking_request(srv.baseline, frame(i))

    async def ours_blocking(i: int) -> object:
        reply = blocking_request(srv.zcoder, frame(i))
        assert b'"pong"' in reply or b'"accepted"' in reply, reply
        return reply

    async def ours(i: int) -> object:
        if kind == "ping":
            return await client.ping(
                srv.zcoder, target_instance_id=srv.target, sender_instance_id=srv.sender
            )
        ack = await client.send(
            srv.zcoder, envelope(srv.sender, srv.target, next(ids)), io_timeout=2
        )
        assert ack.status == "accepted", ack
        return ack

    async def ours_trio(i: int) -> object:
        ack = decode_ack(await trio_stream_request(srv.zcoder, frame(i)))
        assert ack.status in ("pong", "accepted"), ack
        return ack

    return {
        "baseline": baseline,
        "zcoder": ours,
        "zcoder, blocking client": ours_blocking,
        "zcoder, Trio-stream client": ours_trio,
    }


async def trio_stream_request(path: Path, frame: bytes) -> bytes:
    """The client's exchange over ``trio.SocketStream`` instead of ``wire``'s plain
    non-blocking socket: what ``client.py`` would cost on Trio's streams."""
    decoder = FrameDecoder(max_bytes=Limits().max_bytes)
    async with await trio.open_unix_socket(path) as stream:
        await stream.send_all(frame)
        while True:
            chunk = await stream.receive_some(decoder.wanted())
            if not chunk:
                raise EOFError
            if (payload := decoder.feed(chunk)) is not None:
                return payload


def report(kind: str, srv: Servers) -> float:
    """Print the rows of one kind of request; return the baseline's p50."""
    cpu = (cpu_seconds(srv.baseline_pid), cpu_seconds(srv.zcoder_pid))
    samples = trio.run(interleaved, variants(kind, srv))
    rounds = WARMUP + REQUESTS
    cpu_base = (cpu_seconds(srv.baseline_pid) - cpu[0]) / rounds
    cpu_ours = (cpu_seconds(srv.zcoder_pid) - cpu[1]) / ((len(samples) - 1) * rounds)
    base50 = percentiles(samples["baseline"])[0]
    for name, values in samples.items():
        p50, p99 = percentiles(values)
        server_cpu = cpu_base if name == "baseline" else cpu_ours
        row = f"  {kind:7} {name:26}{ms(p50):>11}{ms(p99):>11}{p50 / base50:>8.2f}x"
        print(f"{row}{server_cpu * 1e6:>9.0f} us")
    return base50


@contextmanager
def servers(root: Path, spool_parent: Path) -> Iterator[Servers]:
    relay_dir = private_dir(root / f"agents-{secrets.token_hex(3)}")
    me = reserve_instance(relay_dir)
    publish_manifest(me.manifest_path, manifest_for(relay_dir, me.instance_id, "bench"))
    spools = Path(tempfile.mkdtemp(prefix="zb", dir=spool_parent))
    base_sock = relay_dir / "baseline.sock"
    try:
        with (
            child("serve-zcoder", os.fspath(relay_dir), os.fspath(spools), "1") as (z, ids),
            child("serve-baseline", os.fspath(base_sock), os.fspath(spools)) as (b, _),
        ):
            sock = relay_dir / f"a-{ids[0]}.sock"
            yield Servers(me.instance_id, ids[0], sock, base_sock, z.pid, b.pid)
    finally:
        shutil.rmtree(spools, ignore_errors=True)


def round_trips(root: Path) -> float:
    """Print the round-trip figures; return the baseline ping's p50."""
    print(f"round trips between two processes: {REQUESTS} of each after {WARMUP} warm-up,")
    print("variants interleaved in random order (the host is shared; ratios are the figure)")
    print(f"  {'':34}{'p50':>11}{'p99':>11}{'ratio':>9}{'srv CPU':>12}")
    shm = Path("/dev/shm")
    with servers(root, shm if shm.is_dir() else root) as srv:
        base_ping = report("ping", srv)
        report("enqueue", srv)
        idle = idle_cpu(srv.zcoder_pid)
    print("  (enqueue spool on tmpfs, as under $XDG_RUNTIME_DIR; again on /tmp:)")
    with servers(root, Path(tempfile.gettempdir())) as srv:
        report("enqueue", srv)
    print(f"idle listener (1 instance) CPU over 2 s: {idle * 1000:.3f} ms")
    return base_ping


STALLED = 100
STALLED_REQUESTS = 200


def stalled_connections(root: Path) -> None:
    """Print the enqueue round trip while ``STALLED`` connections hold a partial header."""
    with servers(root, Path(tempfile.gettempdir())) as srv, contextlib.ExitStack() as stack:
        for _ in range(STALLED):
            sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            sock.connect(os.fspath(srv.zcoder))
            sock.sendall(b"ZCODER-AGENT/1 50\n{")
        time.sleep(0.5)  # let the listener accept them all

        async def run() -> list[float]:
            samples = []
            for i in range(STALLED_REQUESTS):
                start = time.perf_counter()
                ack = await client.send(
                    srv.zcoder, envelope(srv.sender, srv.target, i + 1), io_timeout=2
                )
                samples.append(time.perf_counter() - start)
                assert ack.status == "accepted", ack
            return samples

        p50, p99 = percentiles(trio.run(run))
        print(f"enqueue round trip while {STALLED} connections stall, {STALLED_REQUESTS} runs:")
        print(f"  {'':32}{ms(p50):>11}{ms(p99):>11}  (io_timeout 2000 ms; all accepted)")


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def add_stale(relay_dir: Path, count: int, pid: int, tag: str) -> None:
    """Manifests of dead processes (pids above ``pid``): half without a socket, half with a
    dead socket file (connecting is refused)."""
    for n in range(count):
        while True:
            pid += 1
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                continue
        instance_id = f"{pid}-{tag}{n:04d}"
        publish_manifest(
            relay_dir / f"a-{instance_id}.json", manifest_for(relay_dir, instance_id, "stale")
        )
        if n % 2:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
                dead.bind(os.fspath(relay_dir / f"a-{instance_id}.sock"))


async def time_discovery(relay_dir: Path) -> tuple[float, float, int]:
    found = len(await discover(relay_dir, exclude_instance_id=None, io_timeout=2.0))
    samples = []
    for _ in range(DISCOVERY_RUNS):
        start = time.perf_counter()
        peers = await discover(relay_dir, exclude_instance_id=None, io_timeout=2.0)
        samples.append(time.perf_counter() - start)
        found = min(found, len(peers))
    p50, p99 = percentiles(samples)
    return p50, p99, found


def discovery(root: Path, base_ping: float) -> None:
    print(f"discovery, {DISCOVERY_RUNS} runs each (peers served by processes of 8 listeners)")
    print(f"  {'':32}{'p50':>11}{'p99':>11}  {'p50 in baseline pings':>22}")
    for live in (1, 8, 32):
        relay_dir = private_dir(root / f"d{live}")
        spools = private_dir(root / f"s{live}")
        with contextlib.ExitStack() as stack:
            procs = []
            for n in range(0, live, 8):
                args = (os.fspath(relay_dir), os.fspath(spools), str(min(8, live - n)))
                procs.append(stack.enter_context(child("serve-zcoder", *args))[0])
            p50 = discovery_row(relay_dir, f"{live} live peers", base_ping)
            if live == 32:
                # names "a-4000001-..." sort after the live ones; the next 128 sort first
                add_stale(relay_dir, 128, 4_000_000, "late")
                s50 = discovery_row(relay_dir, f"{live} live + 128 stale", base_ping)
                print(f"  128 stale manifests add {ms(s50 - p50)} at p50")
                idle = max(idle_cpu(p.pid) for p in procs)
                add_stale(relay_dir, 128, 1_000_000, "early")
                discovery_row(relay_dir, "+ 128 stale sorting first", base_ping)
                print(f"idle CPU of a process serving 8 listeners, 2 s: {idle * 1000:.3f} ms")


def discovery_row(relay_dir: Path, label: str, base_ping: float) -> float:
    p50, p99, found = trio.run(time_discovery, relay_dir)
    row = f"  {label:32}{ms(p50):>11}{ms(p99):>11}  {p50 / base_ping:>22.0f}"
    print(f"{row}   found {found}")
    return p50


RECEIPTS = 300
MUTE_RECEIPTS = 50


async def hold_connections(trio_listener: trio.SocketListener) -> None:
    """A mute sender: accept every connection and never answer."""
    held = []
    try:
        async with trio_listener:
            while True:
                held.append(await trio_listener.accept())
    finally:
        for stream in held:
            stream.socket.close()


async def time_receipts(relay_dir: Path, count: int = RECEIPTS, mute: bool = False) -> list[float]:
    """With ``mute``, a receipt to a mute sender is queued just before each timed one."""
    a, b, c = (reserve_instance(relay_dir) for _ in range(3))
    for res, name in ((a, "sender"), (b, "receiver"), (c, "mute")):
        publish_manifest(res.manifest_path, manifest_for(relay_dir, res.instance_id, name))
    receipts = ReceiptSender(
        me=lambda: b.instance_id, relay_dir=lambda: relay_dir, io_timeout=2.0, max_bytes=65536
    )
    # The receipt is taken when the relay's change is noted (the worker's wake-up).
    changes = Changes()
    intake = ExtensionIntake(spool=lambda: None, changes=changes)
    listener = Listener(
        instance_id=a.instance_id,
        spool=Spool(relay_dir / "unused-spool", max_queue=1),
        sender_check=lambda env: sender_is_registered(relay_dir, env),
        state=lambda: "ready",
        limits=Limits(),
        io_timeout=2.0,
        extension=intake.handle,
    )
    samples = []
    warmup = 0 if mute else WARMUP // 4
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve, [await open_unix_listener(a.socket_path)])
        if mute:
            nursery.start_soon(hold_connections, await open_unix_listener(c.socket_path))
        nursery.start_soon(receipts.run)
        for n in range(warmup + count):
            message = envelope(a.instance_id, b.instance_id, n)
            intake.expect(message.message_id, b.instance_id)
            seen = changes.count
            start = time.perf_counter()
            if mute:
                receipts.send(envelope(c.instance_id, b.instance_id, n), "started")
            receipts.send(message, "completed", "Renamed users.name.", "src/users.py")
            await changes.wait(seen)
            intake.take_receipts()
            samples.append(time.perf_counter() - start)
        nursery.cancel_scope.cancel()
    return samples[warmup:]


def receipt_latency(root: Path) -> None:
    samples = trio.run(time_receipts, private_dir(root / "receipts"))
    p50, p99 = percentiles(samples)
    print(f"\nreceipt latency, turn end to the sender's entry ({len(samples)} receipts)")
    print(f"  p50 {ms(p50)}   p99 {ms(p99)}")
    samples = trio.run(time_receipts, private_dir(root / "mute"), MUTE_RECEIPTS, True)
    p50, p99 = percentiles(samples)
    print(f"  with a mute sender's receipt queued before each ({len(samples)} receipts)")
    print(f"  p50 {ms(p50)}   p99 {ms(p99)}   max {ms(max(samples))}")


def busy_app() -> None:
    """``bench/busy.py``'s figures (it drives a real app in a pty with the fake Ollama of
    ``tests/fakes``: imported from the repository root, this file being run as a script)."""
    sys.path.insert(0, os.fspath(_HERE.parents[1]))
    from bench import busy

    busy.report()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", nargs="?", default="bench")
    parser.add_argument("args", nargs="*")
    opts = parser.parse_args()
    if opts.role == "serve-zcoder":
        relay_dir, spools, count = opts.args
        trio.run(serve_zcoder, Path(relay_dir), Path(spools), int(count))
    elif opts.role == "serve-baseline":
        serve_baseline(Path(opts.args[0]), Path(opts.args[1]))
    else:
        root = Path(tempfile.mkdtemp(prefix="zb", dir="/tmp"))
        try:
            if opts.role not in ("stalled", "receipts", "busy"):  # only that figure
                discovery(root, round_trips(root))
            if opts.role in ("bench", "stalled"):
                stalled_connections(root)
            if opts.role in ("bench", "receipts"):
                receipt_latency(root)
            if opts.role in ("bench", "busy"):
                busy_app()
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
