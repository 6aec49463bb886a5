"""What the start-up and listener benchmarks measure a process with: its memory, a
blocking relay ping, a published manifest, and the plain-Python listener that is their
baseline (a script run with ``python -c``: binds a Unix socket, publishes a JSON manifest
atomically, and answers each ZCODER-AGENT/1 request on its own, one at a time)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

_T = TypeVar("_T")

MAGIC = b"ZCODER-AGENT/1 "
POLL = 0.001

# The plain-Python listener: what a relay peer needs to be found and to answer a ping.
LISTENER = """\
import json, os, socket, sys
d = sys.argv[1]
name = f"a-{os.getpid()}-1"
path = os.path.join(d, name + ".sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(64)
tmp = os.path.join(d, ".tmp-" + name)
with open(tmp, "w") as f:
    json.dump({"protocol": 1, "instance_id": name[2:], "pid": os.getpid(), "socket": path}, f)
os.rename(tmp, os.path.join(d, name + ".json"))
while True:
    conn, _ = s.accept()
    with conn:
        data = b""
        while b"\\n" not in data:
            data += conn.recv(256)
        head, _, body = data.partition(b"\\n")
        size = int(head.split(b" ")[1])
        while len(body) < size:
            body += conn.recv(size - len(body))
        req = json.loads(body)
        ack = {"protocol": 1, "type": "ack", "message_id": req["message_id"],
               "status": "pong", "state": "ready"}
        out = json.dumps(ack, separators=(",", ":")).encode()
        conn.sendall(b"ZCODER-AGENT/1 %d\\n%s" % (len(out), out))
"""

# The same listener on Trio (``serve_listeners``, a task a connection), run by
# ``trio.run`` (argv[2] ``run``) or as the interactive app runs Trio: a guest on an asyncio
# loop (``guest``, as ``app/main.py`` does). What these add to the plain listener is what
# Trio and guest mode cost before any of zcoder's own work.
TRIO_LISTENER = """\
import asyncio, json, os, socket, sys, trio
d, mode = sys.argv[1], sys.argv[2]
name = f"a-{os.getpid()}-1"
path = os.path.join(d, name + ".sock")

async def handler(stream):
    data = b""
    while b"\\n" not in data:
        data += await stream.receive_some(256)
    head, _, body = data.partition(b"\\n")
    size = int(head.split(b" ")[1])
    while len(body) < size:
        body += await stream.receive_some(size - len(body))
    req = json.loads(body)
    ack = {"protocol": 1, "type": "ack", "message_id": req["message_id"],
           "status": "pong", "state": "ready"}
    out = json.dumps(ack, separators=(",", ":")).encode()
    await stream.send_all(b"ZCODER-AGENT/1 %d\\n%s" % (len(out), out))

async def serve():
    s = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await s.bind(path)
    s.listen(64)
    tmp = os.path.join(d, ".tmp-" + name)
    with open(tmp, "w") as f:
        json.dump({"protocol": 1, "instance_id": name[2:], "pid": os.getpid(), "socket": path}, f)
    os.rename(tmp, os.path.join(d, name + ".json"))
    await trio.serve_listeners(handler, [trio.SocketListener(s)])

async def host():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    trio.lowlevel.start_guest_run(
        serve, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon, done_callback=done.set_result)
    (await done).unwrap()

trio.run(serve) if mode == "run" else asyncio.run(host())
"""


def memory_mib(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of ``pid`` in MiB: PSS shares each page among the processes that map it,
    so the libraries that many processes share count once in all."""
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss / 1024, pss / 1024


def manifest(relay_dir: Path) -> dict[str, object] | None:
    """The first manifest with JSON in it in ``relay_dir`` (not an empty reservation)."""
    for entry in os.scandir(relay_dir):
        if entry.name.startswith("a-") and entry.name.endswith(".json"):
            with contextlib.suppress(OSError, ValueError):
                found = json.loads(Path(entry.path).read_bytes())
                if isinstance(found, dict):
                    return found
    return None


def wait_until(probe: Callable[[], _T | None], alive: Callable[[], bool], what: str) -> _T:
    """``probe()`` every millisecond until it gives something (30 s at most)."""
    deadline = time.perf_counter() + 30
    while (found := probe()) is None:
        if not alive():
            raise RuntimeError(f"the process ended before {what}")
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no {what} within 30 s")
        time.sleep(POLL)
    return found


def frame(obj: dict[str, object]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return MAGIC + b"%d\n%s" % (len(body), body)


def ping_frame(target: str, sender: str) -> bytes:
    return frame(
        {
            "protocol": 1,
            "type": "ping",
            "message_id": f"{sender}-ping",
            "target_instance_id": target,
            "sender_instance_id": sender,
        }
    )


def request(path: str, data: bytes, timeout: float = 5.0) -> dict[str, object]:
    """One blocking request; the answer's JSON."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(data)
        got = b""
        while b"\n" not in got:
            chunk = sock.recv(4096)
            if not chunk:
                raise EOFError("closed before an answer")
            got += chunk
        head, _, body = got.partition(b"\n")
        size = int(head.split(b" ")[1])
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            if not chunk:
                raise EOFError("closed in the answer")
            body += chunk
    answer = json.loads(body)
    assert isinstance(answer, dict)
    return answer


def pong(found: dict[str, object]) -> bool | None:
    """Ping the instance of manifest ``found`` once: True on ``pong``, None if not (yet)."""
    target, path = str(found.get("instance_id", "")), str(found.get("socket", ""))
    with contextlib.suppress(OSError, EOFError, ValueError):
        if request(path, ping_frame(target, "1-bench"), timeout=1.0).get("status") == "pong":
            return True
    return None


def quantile(values: list[float], q: int) -> float:
    """The ``q``-th percentile (inclusive method)."""
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
