"""The listener of a real interactive zcoder, idle and while relayed turns run, beside a
plain-Python listener pinged in the same rounds: ``python bench/relay.py busy``, or
``python -m bench.busy [--against SRC]`` to run another checkout's app beside it, busy at
the same time (a before/after under the same load).

zcoder runs in a pty (drained by a thread, at 120x40) against the fake Ollama, whose every
answer streams ``CHUNKS`` chunks ``DELAY`` s apart (a fast local model). This process
registers itself as a sender (a manifest with its pid) and pings, alternately and in a fresh
random order each round, zcoder and the plain listener (``bench/probes.py``), each ping a
new blocking connection. First ``IDLE_PINGS`` rounds while zcoder is idle; then it is sent
``TURNS`` relayed messages at once (each accepted message runs as a relayed turn, one after
another) and the pings go on, a round every ``GAP`` s, kept while zcoder's pong says
``busy``. Printed: p50 and p90 of each, and zcoder's ratio to the plain listener.

Pinged in the same rounds too, as floors: the same minimal listener on Trio
(``bench/probes.py`` ``TRIO_LISTENER``), once run by ``trio.run`` and once as a Trio guest
on an asyncio loop, as the interactive app runs it (DESIGN.md section 1). What the guest
adds to ``trio.run`` is the cost of guest mode itself: each wake-up goes from Trio's I/O
thread through the asyncio loop back to Trio, before any of zcoder's own work.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pexpect

from bench.probes import (
    LISTENER,
    TRIO_LISTENER,
    frame,
    manifest,
    ping_frame,
    quantile,
    request,
    wait_until,
)
from tests.ui.pty_processes import FakeOllamaProcess

REPO = Path(__file__).resolve().parents[1]
MODEL = "qwen3-coder:latest"
CHUNKS = 200
DELAY = 0.004
TURNS = 8
IDLE_PINGS = 400
BUSY_PINGS = 400
GAP = 0.003


def _drain(child: pexpect.spawn, stop: threading.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF):
            child.read_nonblocking(65536, timeout=0.05)


def _running(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def _register(relay: Path) -> str:
    """This process as a sender: its manifest in the relay directory (no socket: receipts
    to it are refused at once)."""
    me = f"{os.getpid()}-{secrets.randbelow(10**20):020d}"
    body = {
        "protocol": 1,
        "instance_id": me,
        "pid": os.getpid(),
        "project": "bench",
        "workspace": "/work/bench",
        "session_id": "1788012120_10392",
        "profile": "coding",
        "model": MODEL,
        "socket": str(relay / f"a-{me}.sock"),
        "state": "ready",
        "started_at": int(time.time()),
    }
    tmp = relay / f".tmp-{me}"
    tmp.write_text(json.dumps(body))
    tmp.chmod(0o600)
    tmp.rename(relay / f"a-{me}.json")
    return me


def _enqueue(found: dict[str, object], me: str, n: int) -> str:
    answer = request(
        str(found["socket"]),
        frame(
            {
                "protocol": 1,
                "type": "enqueue",
                "message_id": f"{me}-{n}",
                "target_instance_id": found["instance_id"],
                "sender_instance_id": me,
                "sender_pid": os.getpid(),
                "sender_project": "bench",
                "sender_workspace": "/work/bench",
                "body": f"Task {n}: summarise the module layout in a paragraph.",
                "created_at": int(time.time()),
            }
        ),
    )
    return str(answer.get("status"))


def _ping(found: dict[str, object], me: str) -> tuple[float, str]:
    data = ping_frame(str(found["instance_id"]), me)
    start = time.perf_counter()
    answer = request(str(found["socket"]), data)
    return time.perf_counter() - start, str(answer.get("state", ""))


def _spawn(src: Path, root: Path, relay: Path, fake_url: str) -> pexpect.spawn:
    """An interactive zcoder of ``src`` in a pty, with its private directories in ``root``."""
    for name in ("home", "runtime", "ws"):
        (root / name).mkdir(mode=0o700, parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCODER_", "OLLAMA_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(src), str(REPO)]),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
        HOME=str(root / "home"),
        ZCODER_HOME=str(root / "home" / "zcoder"),
        XDG_RUNTIME_DIR=str(root / "runtime"),
        ZCODER_RELAY_DIR=str(relay),
        OLLAMA_HOST=fake_url,
        ZCODER_MODEL=MODEL,
    )
    argv = ["-m", "zcoder", "-w", str(root / "ws")]
    return pexpect.spawn(sys.executable, argv, env=env, cwd=str(root / "ws"), dimensions=(40, 120))


def measure(sources: dict[str, Path]) -> dict[str, list[float]]:
    """Samples ``"idle NAME"`` and ``"busy NAME"`` for each of ``sources`` (an app each,
    side by side: both busy at once) and for ``py``, the plain listener."""
    script = {
        "models": [MODEL],
        "responses": [
            {"chunks": [{"content": f"word{i} "} for i in range(CHUNKS)], "delay": DELAY}
        ],
    }
    floors = {"trio": "run", "guest": "guest"}  # name -> TRIO_LISTENER's mode
    names = [*sources, "py", *floors]
    samples: dict[str, list[float]] = {f"{p} {n}": [] for p in ("idle", "busy") for n in names}
    root = Path(tempfile.mkdtemp(prefix="zbb", dir="/tmp"))
    (root / "plain").mkdir(mode=0o700)
    relays = {name: root / f"relay{n}" for n, name in enumerate(sources)}
    for relay in relays.values():
        relay.mkdir(mode=0o700)
    children: dict[str, pexpect.spawn] = {}
    stop = threading.Event()
    drainers: list[threading.Thread] = []
    fake = FakeOllamaProcess(script, root)
    plain = subprocess.Popen([sys.executable, "-c", LISTENER, str(root / "plain")])
    others: dict[str, subprocess.Popen[bytes]] = {}
    for name, mode in floors.items():
        (root / name).mkdir(mode=0o700)
        others[name] = subprocess.Popen(
            [sys.executable, "-c", TRIO_LISTENER, str(root / name), mode]
        )
    try:
        for n, (name, src) in enumerate(sources.items()):
            children[name] = _spawn(src, root / f"z{n}", relays[name], fake.url)
            drainers.append(threading.Thread(target=_drain, args=(children[name], stop)))
            drainers[-1].start()
        targets = {
            name: wait_until(functools.partial(manifest, relays[name]), child.isalive, "one")
            for name, child in children.items()
        }
        targets["py"] = wait_until(
            lambda: manifest(root / "plain"), lambda: plain.poll() is None, "a manifest"
        )
        for name, proc in others.items():
            targets[name] = wait_until(
                functools.partial(manifest, root / name), functools.partial(_running, proc), name
            )
        me = {name: _register(relay) for name, relay in relays.items()}
        me.update({key: "1-bench" for key in ("py", *floors)})
        time.sleep(1.0)  # the first screens and the warm-ups
        for _ in range(IDLE_PINGS):
            for key in random.sample(names, len(names)):
                samples[f"idle {key}"].append(_ping(targets[key], me[key])[0])
            time.sleep(GAP)
        for name in sources:
            statuses = [_enqueue(targets[name], me[name], n) for n in range(TURNS)]
            assert all(s == "accepted" for s in statuses), statuses
        deadline = time.monotonic() + 120
        last_busy = time.monotonic()  # the turns are over once none is busy for 3 s
        while time.monotonic() - last_busy < 3 and time.monotonic() < deadline:
            if min(len(samples[f"busy {name}"]) for name in sources) >= BUSY_PINGS:
                break
            round_ = {key: _ping(targets[key], me[key]) for key in random.sample(names, len(names))}
            if all(round_[name][1] == "busy" for name in sources):
                last_busy = time.monotonic()
                for key in names:
                    samples[f"busy {key}"].append(round_[key][0])
            time.sleep(GAP)
        return samples
    finally:
        stop.set()
        for drainer in drainers:
            drainer.join()
        for child in children.values():
            child.close(force=True)
        for proc in (plain, *others.values()):
            proc.kill()
            proc.wait()
        fake.close()
        shutil.rmtree(root, ignore_errors=True)


def report(sources: dict[str, Path] | None = None) -> None:
    sources = sources or {"zcoder": REPO / "src"}
    samples = measure(sources)
    print("\nping of an interactive zcoder in a pty (new connection each), beside a plain-")
    print("Python listener in the same rounds; goals (issue 27): p50 idle <= 2x, p90 while")
    print(f"relayed turns run <= 3x ({TURNS} turns of {CHUNKS} chunks {DELAY * 1000:g} ms apart)")
    for name, src in sources.items():
        if name != "zcoder":
            print(f"  ({name}: {src})")
    print(f"  {'':34}{'p50':>11}{'p90':>11}{'p50 ratio':>11}{'p90 ratio':>11}")
    for phase in ("idle", "busy"):
        py = samples[f"{phase} py"]
        if len(py) < 10:
            print(f"  {phase}: only {len(py)} samples")
            continue
        p50, p90 = quantile(py, 50), quantile(py, 90)
        label = "idle" if phase == "idle" else "while relayed turns run"
        for name in sources:
            z = samples[f"{phase} {name}"]
            z50, z90 = quantile(z, 50), quantile(z, 90)
            print(
                f"  {name + ', ' + label:34}{z50 * 1000:>8.3f} ms{z90 * 1000:>8.3f} ms"
                f"{z50 / p50:>10.2f}x{z90 / p90:>10.2f}x   ({len(z)} pings)"
            )
        for key, what in (("trio", "Trio listener, trio.run"), ("guest", "Trio listener, guest")):
            f = samples[f"{phase} {key}"]
            f50, f90 = quantile(f, 50), quantile(f, 90)
            print(
                f"  {what:34}{f50 * 1000:>8.3f} ms{f90 * 1000:>8.3f} ms"
                f"{f50 / p50:>10.2f}x{f90 / p90:>10.2f}x   (floor)"
            )
        print(f"  {'plain Python, same rounds':34}{p50 * 1000:>8.3f} ms{p90 * 1000:>8.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout's src, side by side")
    args = parser.parse_args()
    sources = {"zcoder": REPO / "src"}
    if args.against:
        sources["against"] = args.against.resolve()
    report(sources)
