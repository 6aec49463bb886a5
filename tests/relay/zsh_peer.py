"""A stand-in for the other (Zsh) implementation of ZCODER-AGENT/1, for interop tests.

It behaves as ``../shared/spec/wire-peers.md`` records the Zsh peer, byte for byte, and
imports nothing from zcoder, so that it checks zcoder against the spec's facts rather than
against zcoder's own code. It is also "a version-1-only peer": it knows the request types
``ping`` and ``enqueue`` and answers any other type ``unsupported``.

What it does, like the Zsh peer:

* instance id ``<pid>-<20 digits>``; manifest ``a-<id>.json`` with the spec's eleven fields
  in the spec's order, compact, no trailing newline, mode 0644 (the process umask of a
  typical shell) inside the 0700 relay directory; socket ``a-<id>.sock``;
* serves one connection at a time and one request per connection, then closes; the header
  may have leading zeros; the payload must be a flat JSON object (a nested value is
  ``invalid``), unknown keys are ignored;
* checks in this order: parse (``invalid``), ``protocol`` (``invalid`` / ``unsupported``),
  target (``wrong_target``), then the type: ``ping`` gets ``pong`` without any check of
  ``message_id`` or ``sender_instance_id``; ``enqueue`` gets ``duplicate`` for an id seen
  before, ``paused`` while paused, else ``accepted`` with its place in the queue (nothing
  is ever consumed); any other type gets ``unsupported``;
* every ack carries all five fields after ``type``, ``queue_position`` being ``0`` on every
  status but ``accepted``, and ``state`` on every ack;
* no sender check: any enqueue is taken.

What it can be told to do instead (command-line options, or ``ZshPeer(...)`` arguments):

* ``--status S``: answer every enqueue ``S`` (any of the eight statuses, or any word);
* ``--ping-status S``: answer pings ``S`` instead of ``pong``;
* ``--state S``: the state it reports (``paused`` also makes enqueues ``paused``);
* ``--drop-first``: read a new message id's enqueue, store it, and close without an ack
  (the sender's retry is then answered ``duplicate``);
* ``--nonce DIGITS``: the instance id's nonce (default: 20 random digits);
* ``--manifest-extra JSON``: keys added to the manifest after the spec's fields (a newer
  peer);
* ``--log FILE``: one JSON line per request, ``{"payload": <hex>, "answer": <status or
  null>}``, written before the answer.

Run it as ``python -m tests.relay.zsh_peer --relay-dir D [options]``: it prints ``READY
<instance_id> <socket>`` on stdout, then obeys one command per stdin line, answering each
with one line:

* ``send <socket> <target-id> <body as JSON>``: an enqueue in the Zsh form (the spec's ten
  fields in order, raw UTF-8, ``/`` unescaped, message id ``<own id>-<n>``, n from 1) ->
  ``ACK <ack payload as JSON>`` or ``ERROR <reason>``;
* ``ping <socket> <target-id> [observer]``: a Zsh ping (``observer``: sent as
  ``observer-<pid>``, as before its listener is up) -> ``ACK ...`` or ``ERROR ...``;
* ``quit`` or end of input: remove its manifest and socket, exit 0.

``ZshPeer`` starts one from Python and talks to it; ``zsh_ack``, ``zsh_ping`` and
``zsh_enqueue`` build the literal payloads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["ZshPeer", "zsh_ack", "zsh_enqueue", "zsh_frame", "zsh_ping"]

MAGIC = b"ZCODER-AGENT/1 "
_IO_TIMEOUT = 10.0  # generous: the Zsh peer has none; this only keeps a broken test finite
_MAX_BYTES = 65536
_REPO = Path(__file__).resolve().parents[2]


# -- the literal payloads ---------------------------------------------------------------


def _compact(fields: dict[str, Any]) -> bytes:
    """Flat JSON in the given key order, no spaces, raw UTF-8, ``/`` not escaped."""
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def zsh_ack(
    message_id: str, status: str, *, queue_position: int = 0, state: str = "ready"
) -> bytes:
    """An ack exactly as the Zsh peer writes it: all five fields after ``type``."""
    return _compact(
        {
            "protocol": 1,
            "type": "ack",
            "message_id": message_id,
            "status": status,
            "queue_position": queue_position,
            "state": state,
        }
    )


def zsh_ping(target: str, sender: str, message_id: str) -> bytes:
    return _compact(
        {
            "protocol": 1,
            "type": "ping",
            "message_id": message_id,
            "target_instance_id": target,
            "sender_instance_id": sender,
        }
    )


def zsh_enqueue(
    *,
    message_id: str,
    target: str,
    sender: str,
    sender_pid: int,
    project: str,
    workspace: str,
    body: str,
    created_at: int,
) -> bytes:
    """The spec's ten fields in the spec's order."""
    return _compact(
        {
            "protocol": 1,
            "type": "enqueue",
            "message_id": message_id,
            "target_instance_id": target,
            "sender_instance_id": sender,
            "sender_pid": sender_pid,
            "sender_project": project,
            "sender_workspace": workspace,
            "body": body,
            "created_at": created_at,
        }
    )


def zsh_frame(payload: bytes) -> bytes:
    return MAGIC + str(len(payload)).encode() + b"\n" + payload


# -- serving ------------------------------------------------------------------------------


class _Bad(Exception):
    """A frame the Zsh peer answers ``invalid`` with an empty message id."""


def _read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _read_request(conn: socket.socket) -> bytes:
    header = b""
    while not header.endswith(b"\n"):
        byte = conn.recv(1)
        if not byte:
            raise EOFError
        header += byte
        if len(header) > 64:
            raise _Bad("header too long")
    if not header.startswith(MAGIC):
        raise _Bad("no magic")
    digits = header[len(MAGIC) : -1]
    if not digits.isdigit() or not 1 <= int(digits) <= _MAX_BYTES:  # leading zeros allowed
        raise _Bad("bad length")
    return _read_exact(conn, int(digits))


def _flat_object(payload: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise _Bad("not JSON") from None
    if type(obj) is not dict or any(type(v) in (dict, list) for v in obj.values()):
        raise _Bad("not a flat object")
    return obj


class _Server:
    def __init__(self, ns: argparse.Namespace, instance_id: str) -> None:
        self.ns = ns
        self.instance_id = instance_id
        self.seen: list[str] = []  # stored message ids, in order

    def decide(self, obj: dict[str, Any]) -> tuple[str, str, int] | None:
        """(message id, status, queue position), or ``None`` to close without an answer."""
        mid = obj.get("message_id")
        mid = mid if type(mid) is str else ""
        if type(obj.get("protocol")) is not int:
            return mid, "invalid", 0
        if obj["protocol"] != 1:
            return mid, "unsupported", 0
        if obj.get("target_instance_id") != self.instance_id:
            return mid, "wrong_target", 0
        kind = obj.get("type")
        if kind == "ping":
            return mid, self.ns.ping_status, 0
        if kind != "enqueue":
            return mid, "unsupported", 0
        if self.ns.status not in (None, "accepted"):
            return mid, self.ns.status, 0
        if self.ns.status == "accepted":  # accepted whatever it is, duplicate or not
            self.seen.append(mid)
            return mid, "accepted", len(self.seen)
        if mid in self.seen:
            return mid, "duplicate", 0
        if self.ns.state == "paused":
            return mid, "paused", 0
        self.seen.append(mid)
        if self.ns.drop_first:
            return None
        return mid, "accepted", len(self.seen)

    def serve_one(self, conn: socket.socket) -> None:
        conn.settimeout(_IO_TIMEOUT)
        try:
            payload = _read_request(conn)
        except _Bad:
            self._answer(conn, b"", ("", "invalid", 0))
            return
        try:
            decision = self.decide(_flat_object(payload))
        except _Bad:
            decision = ("", "invalid", 0)
        self._answer(conn, payload, decision)

    def _answer(
        self, conn: socket.socket, payload: bytes, decision: tuple[str, str, int] | None
    ) -> None:
        if self.ns.log:
            answer = None if decision is None else decision[1]
            line = {"payload": payload.hex(), "answer": answer}
            with open(self.ns.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
        if decision is not None:
            mid, status, position = decision
            state = self.ns.state
            conn.sendall(zsh_frame(zsh_ack(mid, status, queue_position=position, state=state)))


def _exchange(path: str, payload: bytes) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_IO_TIMEOUT)
        sock.connect(path)
        sock.sendall(zsh_frame(payload))
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    head, _, body = reply.partition(b"\n")
    if not head.startswith(MAGIC) or len(body) != int(head[len(MAGIC) :]):
        raise OSError(f"not a frame: {reply[:80]!r}")
    return body.decode("utf-8")


class _Sender:
    def __init__(self, ns: argparse.Namespace, instance_id: str) -> None:
        self.ns = ns
        self.instance_id = instance_id
        self.sent = 0

    def obey(self, line: str) -> str:
        word, _, rest = line.partition(" ")
        try:
            if word == "send":
                path, target, body = rest.split(" ", 2)
                self.sent += 1
                payload = zsh_enqueue(
                    message_id=f"{self.instance_id}-{self.sent}",
                    target=target,
                    sender=self.instance_id,
                    sender_pid=os.getpid(),
                    project=self.ns.project,
                    workspace=self.ns.workspace,
                    body=json.loads(body),
                    created_at=int(time.time()),
                )
                return "ACK " + _exchange(path, payload)
            if word == "ping":
                path, target, *how = rest.split(" ")
                sender = f"observer-{os.getpid()}" if how == ["observer"] else self.instance_id
                mid = f"ping-{os.getpid()}-{secrets.randbelow(32768)}"
                return "ACK " + _exchange(path, zsh_ping(target, sender, mid))
        except (OSError, ValueError) as exc:
            return f"ERROR {exc}"
        return f"UNKNOWN {line}"


def _manifest(ns: argparse.Namespace, instance_id: str, sock: str) -> bytes:
    fields: dict[str, Any] = {
        "protocol": 1,
        "instance_id": instance_id,
        "pid": os.getpid(),
        "project": ns.project,
        "workspace": ns.workspace,
        "session_id": "1788012120_10392",
        "profile": "coding",
        "model": "qwen3-coder",
        "socket": sock,
        "state": ns.state,
        "started_at": int(time.time()),
    }
    fields.update(json.loads(ns.manifest_extra))
    return _compact(fields)


def _publish(path: Path, data: bytes) -> None:
    temp = path.with_name(f".tmp-{secrets.token_hex(4)}.json")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        os.fchmod(f.fileno(), 0o644)  # whatever this process's umask is
    os.rename(temp, path)


def _reply(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _lines(buffer: bytearray) -> list[str]:
    """Take the complete lines out of ``buffer``."""
    *lines, rest = bytes(buffer).split(b"\n")
    buffer[:] = rest
    return [line.decode("utf-8") for line in lines]


def _serve(ns: argparse.Namespace) -> None:
    relay_dir = Path(os.path.realpath(ns.relay_dir))  # the Zsh peer canonicalises it too
    nonce = ns.nonce or str(10**19 + secrets.randbelow(9 * 10**19))  # 20 digits
    instance_id = f"{os.getpid()}-{nonce}"
    sock_path = relay_dir / f"a-{instance_id}.sock"
    manifest_path = relay_dir / f"a-{instance_id}.json"
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server, sender = _Server(ns, instance_id), _Sender(ns, instance_id)
    try:
        listening.bind(os.fspath(sock_path))
        listening.listen(16)
        _publish(manifest_path, _manifest(ns, instance_id, os.fspath(sock_path)))
        _reply(f"READY {instance_id} {sock_path}")
        commands = bytearray()
        with selectors.DefaultSelector() as selector:
            selector.register(listening, selectors.EVENT_READ)
            selector.register(0, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is listening:
                        conn, _ = listening.accept()
                        with conn, contextlib.suppress(OSError, EOFError):
                            server.serve_one(conn)
                        continue
                    data = os.read(0, 4096)
                    commands += data
                    for line in _lines(commands):
                        if line.strip() == "quit":
                            return
                        _reply(sender.obey(line))
                    if not data:
                        return
    finally:
        listening.close()
        for path in (manifest_path, sock_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.relay.zsh_peer")
    p.add_argument("--relay-dir", required=True)
    p.add_argument("--project", default="zsh-project")
    p.add_argument("--workspace", default="/work/zsh-project")
    p.add_argument("--nonce", default="")
    p.add_argument("--status", default=None)
    p.add_argument("--ping-status", default="pong")
    p.add_argument("--state", default="ready")
    p.add_argument("--drop-first", action="store_true")
    p.add_argument("--manifest-extra", default="{}")
    p.add_argument("--log", default="")
    _serve(p.parse_args(argv))


# -- from Python ---------------------------------------------------------------------------


class ZshPeer:
    """A ``python -m tests.relay.zsh_peer`` child; a context manager that always reaps it.
    ``requests()`` returns what it received: (payload, status answered or ``None``)."""

    def __init__(
        self,
        relay_dir: Path,
        *,
        status: str | None = None,
        ping_status: str = "pong",
        state: str = "ready",
        drop_first: bool = False,
        manifest_extra: dict[str, Any] | None = None,
        project: str = "zsh-project",
        workspace: str = "/work/zsh-project",
        nonce: str = "",
    ) -> None:
        self.log = relay_dir.parent / f"zsh-{secrets.token_hex(4)}.log"
        args = [
            sys.executable,
            "-m",
            "tests.relay.zsh_peer",
            "--relay-dir",
            os.fspath(relay_dir),
            "--ping-status",
            ping_status,
            "--state",
            state,
            "--manifest-extra",
            json.dumps(manifest_extra or {}),
            "--project",
            project,
            "--workspace",
            workspace,
            "--log",
            os.fspath(self.log),
            "--nonce",
            nonce,
        ]
        if status is not None:
            args += ["--status", status]
        if drop_first:
            args.append("--drop-first")
        env = dict(os.environ, PYTHONPATH=os.fspath(_REPO))
        self.proc = subprocess.Popen(
            args, cwd=_REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        first = self._line()
        if not first.startswith("READY "):
            self.close()
            raise RuntimeError(f"zsh peer did not start: {first!r}")
        _, self.instance_id, socket_path = first.split(" ", 2)
        self.socket = Path(socket_path)
        self.manifest_path = relay_dir / f"a-{self.instance_id}.json"
        self.pid = self.proc.pid

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().rstrip("\n")

    def command(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._line()

    def requests(self) -> list[tuple[bytes, str | None]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [(bytes.fromhex(r["payload"]), r["answer"]) for r in map(json.loads, lines)]

    def close(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stdin):
            if stream is not None and not stream.closed:
                stream.close()
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> ZshPeer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


if __name__ == "__main__":
    main()
