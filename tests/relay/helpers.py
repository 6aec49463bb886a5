"""Relay helpers for the tests and the bench.

In-process: ``make_enqueue`` builds an envelope, ``serve_fake_peer`` runs a listener and
publishes its manifest inside the caller's nursery, ``register_sender`` publishes a
manifest for the current process so that its sends pass the sender check.

Out of process: ``python -m tests.relay.helpers --relay-dir D --project P --workspace W``
runs a real ``RelayService`` and prints ``READY <instance_id> <socket>`` (or
``UNAVAILABLE <reason>``) on stdout. It then obeys one command per stdin line and answers
each with one line:

* ``claim`` -> ``TURN <sequence> <message_id> <verified> <body as JSON>`` after claiming and
  completing the oldest message, or ``EMPTY``;
* ``depth`` -> ``DEPTH <n>``; ``pause`` / ``resume`` -> ``OK``;
* ``send <target-id> <message-id> <body as JSON>`` -> ``ACK <status> <position or ->`` or
  ``ERROR <reason>``; ``peers`` -> ``PEERS <instance ids, space-separated>``;
* ``quit`` (or end of input) -> the service shuts down and the process exits 0.

``PeerProcess`` starts one from Python and talks to it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import trio

from zcoder.config import RelaySettings
from zcoder.errors import RelayError
from zcoder.relay import client
from zcoder.relay.envelope import Enqueue, Limits
from zcoder.relay.listener import Listener, open_unix_listener
from zcoder.relay.paths import reserve_instance
from zcoder.relay.registry import Manifest, publish_manifest
from zcoder.relay.service import RelayService

__all__ = [
    "PeerProcess",
    "make_enqueue",
    "make_manifest",
    "register_sender",
    "serve_fake_peer",
]

_REPO = Path(__file__).resolve().parents[2]


def make_enqueue(
    message_id: str,
    *,
    body: str = "do the task",
    target: str = "2-efgh",
    sender: str = "1-abcd",
    project: str = "sender",
    workspace: str = "/work/sender",
    created_at: int = 1788012245,
) -> Enqueue:
    """An ``enqueue`` envelope; the sender pid is the sender id's prefix."""
    return Enqueue(
        protocol=1,
        type="enqueue",
        message_id=message_id,
        target_instance_id=target,
        sender_instance_id=sender,
        sender_pid=int(sender.split("-", 1)[0]),
        sender_project=project,
        sender_workspace=workspace,
        body=body,
        created_at=created_at,
    )


def make_manifest(
    relay_dir: Path,
    instance_id: str,
    *,
    project: str = "proj",
    workspace: str = "/work/proj",
    state: str = "ready",
) -> Manifest:
    return Manifest(
        protocol=1,
        instance_id=instance_id,
        pid=int(instance_id.split("-", 1)[0]),
        project=project,
        workspace=workspace,
        session_id="1788012120_10392",
        profile="coding",
        model="qwen3-coder",
        socket=os.fspath(relay_dir / f"a-{instance_id}.sock"),
        state=state,
        started_at=1788012102,
    )


class _NoSpool:
    """A spool for listeners that are only pinged."""

    paused = False

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]:
        raise AssertionError("this fake peer takes no messages")


async def serve_fake_peer(
    nursery: trio.Nursery,
    relay_dir: Path,
    instance_id: str,
    *,
    answer_as: str | None = None,
    state: str = "ready",
    **fields: str,
) -> Manifest:
    """Listen on ``a-<instance_id>.sock`` (answering as ``answer_as``, default the same id),
    publish the manifest for ``instance_id`` and return it."""
    trio_listener = await open_unix_listener(relay_dir / f"a-{instance_id}.sock")
    listener = Listener(
        instance_id=answer_as or instance_id,
        spool=_NoSpool(),
        sender_check=lambda _: True,
        state=lambda: state,
        limits=Limits(),
        io_timeout=5.0,
    )
    await nursery.start(listener.serve, [trio_listener])
    manifest = make_manifest(relay_dir, instance_id, **fields)
    publish_manifest(relay_dir / f"a-{instance_id}.json", manifest)
    return manifest


def register_sender(relay_dir: Path, project: str = "sender") -> Manifest:
    """Reserve an id for this process and publish its manifest (no listener needed for
    the sender check: manifest, pid and liveness)."""
    reservation = reserve_instance(relay_dir)
    manifest = make_manifest(
        relay_dir, reservation.instance_id, project=project, workspace="/work/sender"
    )
    publish_manifest(reservation.manifest_path, manifest)
    return manifest


# -- the peer process --------------------------------------------------------------------


class PeerProcess:
    """A ``python -m tests.relay.helpers`` child. Use as a context manager: the child is
    told to quit, then killed if it lingers, and always reaped."""

    def __init__(self, relay_dir: Path, project: str, workspace: Path, *extra: str) -> None:
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="zp", dir="/tmp"))
        args = [
            sys.executable,
            "-m",
            "tests.relay.helpers",
            "--relay-dir",
            os.fspath(relay_dir),
            "--project",
            project,
            "--workspace",
            os.fspath(workspace),
            "--runtime-dir",
            os.fspath(self.runtime_dir),
            *extra,
        ]
        # This checkout's sources, not whichever zcoder is installed.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(os.fspath, (_REPO, _REPO / "src"))))
        self.proc = subprocess.Popen(
            args, cwd=_REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        first = self._line()
        if not first.startswith("READY "):
            self.close()
            raise RuntimeError(f"peer did not start: {first!r}")
        _, self.instance_id, socket_path = first.split(" ", 2)
        self.socket = Path(socket_path)
        self.pid = self.proc.pid

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().rstrip("\n")

    def command(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stdin):
            if stream is not None and not stream.closed:
                stream.close()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        return code

    def kill(self) -> None:
        """Die at once, as a crash would (no cleanup)."""
        self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


async def _commands(service: RelayService, stream: trio.abc.ReceiveStream) -> None:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        word = line.decode().strip()
        if word == "quit":
            return
        _reply(await _obey(service, word))


async def _obey(service: RelayService, line: str) -> str:
    word, _, rest = line.partition(" ")
    if word == "send":
        return await _send(service, *rest.split(" ", 2))
    if word == "peers":
        return "PEERS " + " ".join(p.manifest.instance_id for p in await service.discover())
    spool = service.spool
    if word == "claim":
        claimed = spool.claim() if spool is not None else None
        if claimed is None:
            return "EMPTY"
        assert spool is not None
        spool.complete(claimed)
        env = claimed.envelope
        return f"TURN {claimed.sequence} {env.message_id} {claimed.verified} {json.dumps(env.body)}"
    if word == "depth":
        return f"DEPTH {service.status().queued}"
    if word in ("pause", "resume"):
        if word == "pause":
            service.pause()
        else:
            service.resume()
        return "OK"
    return f"UNKNOWN {line}"


async def _send(service: RelayService, target: str, message_id: str, body: str) -> str:
    envelope = attrs.evolve(service.new_envelope(target, json.loads(body)), message_id=message_id)
    assert service.health.relay_dir is not None
    try:
        ack = await client.send(
            service.health.relay_dir / f"a-{target}.sock", envelope, io_timeout=2.0
        )
    except RelayError as exc:
        return f"ERROR {exc}"
    return f"ACK {ack.status} {ack.queue_position or '-'}"


def _reply(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _peer_main(ns: argparse.Namespace) -> None:
    settings = RelaySettings(
        mode="paused" if ns.paused else "on",
        dir=Path(ns.relay_dir),
        max_queue=ns.max_queue,
        io_timeout=ns.io_timeout,
    )
    service = RelayService(
        settings=settings,
        settings_problem="",
        runtime_dir=Path(ns.runtime_dir),
        env={},
        project=ns.project,
        workspace=Path(ns.workspace),
        profile="coding",
        model="qwen3-coder",
        session_id=f"{int(time.time())}_1",
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        status = service.status()
        if not status.available:
            _reply(f"UNAVAILABLE {status.reason}")
            nursery.cancel_scope.cancel()
            return
        _reply(f"READY {status.instance_id} {ns.relay_dir}/a-{status.instance_id}.sock")
        await _commands(service, trio.lowlevel.FdStream(os.dup(0)))
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.relay.helpers")
    p.add_argument("--relay-dir", required=True)
    p.add_argument("--project", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--runtime-dir", required=True)
    p.add_argument("--max-queue", type=int, default=16)
    p.add_argument("--io-timeout", type=float, default=2.0)
    p.add_argument("--paused", action="store_true")
    ns = p.parse_args(argv)
    ns.relay_dir = os.path.realpath(ns.relay_dir)  # what the service canonicalises it to
    trio.run(_peer_main, ns)


if __name__ == "__main__":
    main()
