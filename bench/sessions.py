"""Session save benchmark: what a save costs as the session grows, and what it does to the
relay. Run ``python -m bench.sessions [TURNS]`` (default 500).

One process runs a relay listener on Trio (as the app does) and a simulated session: each
turn adds a prompt, a tool call, its output and an answer (about 1.3 KiB, as measured on a
receiver of relayed work) and saves twice, at its start and end, as the agent does. A
thread pings the listener with a blocking client all along. Two ways of saving, in the same
run: the old whole-file save on the Trio thread (unstructure everything, ``json.dumps``,
temp file, two fsyncs: the baseline), and the store's journal save in a worker thread
(``SessionStore.save_async``). Printed at turns 10, 100 and 500: bytes written per save, the
save's median time (wall, as the caller waits), and the relay ping p99 during those turns.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import zcoder.session.saves as saves
from bench.relay import blocking_request, frame_of
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.relay.envelope import Limits
from zcoder.relay.listener import Listener, open_unix_listener
from zcoder.relay.paths import reserve_instance
from zcoder.relay.spool.store import Spool
from zcoder.session.data import converter
from zcoder.session.files import write_atomic
from zcoder.session.store import Session, SessionStore

MARKS = (10, 100, 500)
_WINDOW = 10  # turns measured around each mark


def add_turn(session: Session, n: int) -> None:
    session.record_user_prompt(f"relayed request {n}: update the digest for display_name")
    session.history += [
        Message("user", f"<agent_relay>\nrequest {n}: " + "update weeklyDigest.ts " * 4),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("run_command", {"command": f"npm test -- digest{n}"}, id="c1"),),
        ),
        Message("tool", "Exit code: 0\n" + "PASS src/digest.test.ts\n" * 30, tool_name="x"),
        Message("assistant", "Updated weeklyDigest.ts; the focused tests pass. " * 5),
    ]
    session.events += [
        TranscriptEvent("relay", f"request {n}", meta={"project": "p", "pid": "42"}),
        TranscriptEvent("tool", "npm test", meta={"name": "run_command", "state": "completed"}),
        TranscriptEvent("assistant", "Updated weeklyDigest.ts."),
    ]


class WholeFile:
    """The save before the journal: the whole session, on the caller's (Trio) thread."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.written = 0

    async def save(self, session: Session) -> None:
        body = converter.unstructure(session)
        data = json.dumps({"format": 1, **body}, separators=(",", ":")).encode("ascii")
        write_atomic(self.dir, f"{session.id}.json", data)
        self.written += len(data)


class Journal:
    """The store's save, in a worker thread; counts the bytes it hands to the disk."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.written = 0
        # Wrapped where session.saves looks them up: the bytes it hands to the disk.
        real_append, real_atomic = vars(saves)["append_at"], vars(saves)["write_atomic"]

        def append_at(path: Path, offset: int, data: bytes) -> None:
            self.written += len(data)
            real_append(path, offset, data)

        def atomic(directory: Path, name: str, data: bytes) -> None:
            self.written += len(data)
            real_atomic(directory, name, data)

        vars(saves).update(append_at=append_at, write_atomic=atomic)

    async def save(self, session: Session) -> None:
        await self.store.save_async(session)


class Pinger(threading.Thread):
    """Pings the listener from a plain thread, so that its own loop is never the delay."""

    def __init__(self, sock: Path, target: str) -> None:
        super().__init__(daemon=True)
        fields = {"protocol": 1, "type": "ping", "message_id": "bench-p"}
        self.frame = frame_of({**fields, "target_instance_id": target, "sender_instance_id": "b"})
        self.sock = sock
        self.samples: list[tuple[float, float]] = []  # (when, seconds)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.perf_counter()
            blocking_request(self.sock, self.frame)
            self.samples.append((start, time.perf_counter() - start))
            time.sleep(0.001)


async def run_turns(
    save: Callable[[Session], Awaitable[None]], session: Session, turns: int, saver: Any
) -> list[tuple[float, float, int, float]]:
    """Per turn: (start, end, bytes written, median save seconds)."""
    out = []
    for n in range(turns):
        start, before, took = time.perf_counter(), saver.written, []
        add_turn(session, n)
        for _ in range(2):
            t = time.perf_counter()
            await save(session)
            took.append(time.perf_counter() - t)
            await trio.sleep(0.002)  # the model streaming: the loop serves the relay
        out.append((start, time.perf_counter(), saver.written - before, statistics.median(took)))
    return out


async def bench(root: Path, turns: int) -> None:
    relay_dir = root / "agents"
    relay_dir.mkdir(mode=0o700)
    reservation = reserve_instance(relay_dir)
    spool = Spool(root / "spool", max_queue=16)
    spool.create()
    listener = Listener(
        instance_id=reservation.instance_id,
        spool=spool,
        sender_check=lambda env: True,
        state=lambda: "ready",
        limits=Limits(),
        io_timeout=2.0,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.serve, [await open_unix_listener(reservation.socket_path)])
        marks = [m for m in MARKS if m <= turns]
        print(f"{turns} turns, 2 saves each; ping from another thread throughout")
        print(f"  {'turn':>5} {'save':28}{'bytes/save':>12}{'ms/save':>10}{'ping p99':>12}")
        for name in ("whole file, Trio thread", "journal, worker thread"):
            ws = root / secrets.token_hex(3)
            ws.mkdir()
            store = SessionStore(root / "home", ws, "coding")
            session = store.create("m")
            saver: Any = WholeFile(store.dir) if name.startswith("whole") else Journal(store)
            store._ensure_dir()
            pinger = Pinger(reservation.socket_path, reservation.instance_id)
            pinger.start()
            rows = await run_turns(saver.save, session, turns, saver)
            pinger.stop.set()
            await trio.to_thread.run_sync(pinger.join)
            for mark in marks:
                window = rows[mark - _WINDOW : mark]
                begin, end = window[0][0], window[-1][1]
                pings = [s for when, s in pinger.samples if begin <= when <= end]
                p99 = statistics.quantiles(pings, n=100, method="inclusive")[98] if pings else 0
                per_save = sum(r[2] for r in window) / (2 * len(window))
                took = statistics.median(r[3] for r in window)
                print(
                    f"  {mark:>5} {name:28}{per_save:>12,.0f}{took * 1000:>10.2f}"
                    f"{p99 * 1000:>9.2f} ms"
                )
            size = (store.dir / f"{session.id}.json").stat().st_size
            print(f"        file {size:,} bytes; {saver.written:,} bytes written in all")
            store.release(session)
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("turns", nargs="?", type=int, default=500)
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zbs", dir="/tmp"))
    os.chmod(root, 0o700)
    try:
        trio.run(bench, root, opts.turns)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
