"""The experiment, end to end: relayed tasks through a real receiver and a real llama.cpp.

SmolLM2-135M behind llama.cpp's own server with a 2,048-token window, as in the failure;
a real interactive zcoder receiver in a pty; the test itself is the senders (real relay
services in this process, so their sends verify and the receipts come back to their own
sockets). Before context management the third relayed task overflowed the window, and the
receiver took llama.cpp's HTTP 400 for a model that is down and held the task forever.

Only what zcoder controls is asserted: every receipt reaches a final state in bounded time,
settled by the task's own turn (never for the window, never left waiting); the receiver
compacted; llama.cpp never got a request larger than its window; a task larger than the
window is settled ``failed`` at once with a reason naming the window, leaving the history
as it was, and the task after it runs. llama.cpp's own refusal (of a task of digits, which
zcoder's estimate takes for a quarter of its tokens) is settled the same way. What the
model answers is never judged: SmolLM2 is tiny.

Run with ``pytest -s`` for the figures: wall time, compactions, the largest prompt
llama.cpp counted. The cost is the model's compute (2 cores: about 180 prompt tokens and
50 output tokens a second), so the tasks are short (about 50 words, replies capped at 16
tokens): the fixed part of each request, zcoder's system prompt, is a quarter of the window.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from tests.app.test_relay_app import Instance, start
from tests.realmodel.llama_server import LlamaServer, missing_reason
from tests.ui.pty_harness import PtyApp
from zcoder.config import RelaySettings
from zcoder.conversation import TranscriptEvent
from zcoder.relay.outbox import Sent
from zcoder.session.data import Session, parse_session

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]

N_CTX = 2048
TASKS = 14
# The tasks come from several senders, as from several instances of one user.
PER_SENDER = 5
OUTPUT_CAP = 16  # replies stay short: the time goes into the prompts, as in the failure
TASK_DEADLINE = 150.0  # a task not settled by then is stuck (a compaction under load: 50 s)
MAX_CHARS = 40000  # the relay's message limit, on both sides, for the oversized task
OVERFLOW = "exceeds the available context size"  # llama.cpp's context error
# llama.cpp's log lines (info level) of each request ("task") it served.
_GENERATED = re.compile(r"task (\d+) \|\s+eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
_RELEASED = re.compile(r"task (\d+) \| stop processing: n_tokens = (\d+), truncated = (\d+)")

_PLACES = (
    "Allenby", "Corran Bay", "Dunmere", "Eskdale", "Fairholt", "Glenrock", "Harwick",
    "Ivel Cross", "Jessop", "Kilnsey", "Lowmoor", "Marden", "Northam", "Oxley", "Penrith",
    "Quarrendon", "Rushmere", "Stanwick", "Tollerton", "Upwell", "Varley", "Wexcombe",
)  # fmt: skip
_TRADES = (
    "a wooden mill", "a salt works", "a rope walk", "a brewery", "a glass kiln",
    "a tannery", "a boatyard", "a paper mill", "a quarry", "a smithy", "a weaving shed",
)  # fmt: skip


def paragraph(n: int) -> str:
    """About 50 words of plain prose, different for every ``n``."""
    place, trade = _PLACES[n % len(_PLACES)], _TRADES[n % len(_TRADES)]
    year = 1700 + 7 * n
    return (
        f"The town of {place} grew up around {trade} founded in {year} on a slow river. In "
        f"{year + 48} a flood carried away the lower buildings, and the owners rebuilt on "
        "the hill above the church, which cost twice as much but kept the works dry. The "
        "buildings are now a museum, with a fair every summer."
    )


def task(n: int) -> str:
    return f"Summarise in one sentence:\n\n{paragraph(n)}"


def digits_task() -> str:
    """A task that zcoder estimates well inside the window (four characters a token) and
    that llama.cpp counts past it: SmolLM2 makes every digit a token of its own."""
    digits = "".join(str((i * 7919 + i * i * 31) % 10) for i in range(3000))
    lines = "\n".join(digits[i : i + 60] for i in range(0, len(digits), 60))
    return f"Summarise in one sentence:\n\n{lines}"


def oversized_task() -> str:
    """About four windows of text (SmolLM2 counts a paragraph at about 70 tokens)."""
    text = "\n\n".join(paragraph(100 + i) for i in range(120))
    return f"Summarise in one sentence:\n\n{text}"


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    """SmolLM2 at the 2,048-token window of the failure, with its own chat template (which
    drops the tool schemas, as llama.cpp's server did in the failure)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"no real model: {reason}")
    with LlamaServer(n_ctx=N_CTX) as started:
        yield started


@attrs.frozen
class Receiver:
    app: PtyApp
    home: Path
    debug_log: Path

    def session(self) -> Session:
        (path,) = (self.home / "sessions").glob("*/[0-9]*.json")
        session, _ = parse_session(path, path.read_bytes())
        return session


def _start_receiver(server: LlamaServer, root: Path, *, warmup: bool) -> Receiver:
    workspace, runtime, home = root / "recv", root / "rt-recv", root / "zh"
    workspace.mkdir()
    runtime.mkdir(mode=0o700)
    debug_log = root / "recv-debug.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCODER_", "OLLAMA_"))}
    env.update(
        TERM="xterm-256color",
        ZCODER_HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        ZCODER_RELAY_DIR=str(root / "agents"),
        ZCODER_RELAY_MAX_MESSAGE_CHARS=str(MAX_CHARS),
    )
    argv = [sys.executable, "-m", "zcoder", "-w", str(workspace), "-m", "smollm2"]
    argv += ["--api", "openai", "--host", f"{server.url}/v1", "--agent-name", "recv"]
    # --deny-commands: a command the model asks for is refused, never a question that
    # would hold a relayed turn for a user who is not there.
    argv += ["--max-output-tokens", str(OUTPUT_CAP), "--deny-commands"]
    argv += ["--debug-log", str(debug_log), *([] if warmup else ["--no-warmup"])]
    app = PtyApp(argv, env=env, cwd=workspace, stty_file=root / "stty.txt")
    try:
        app.wait_until(lambda a: _status_has(a, "relay on"), "the relay is on", 60)
        if warmup:  # its count calibrates the estimate before the first task
            app.wait_until(lambda a: _status_has(a, "ctx "), "the warm-up was counted", 60)
    except BaseException:
        app.terminate()
        raise
    return Receiver(app, home, debug_log)


def _status_has(app: PtyApp, needle: str) -> bool:
    bars = [line for line in app.screen_text().splitlines() if "│ coding │" in line]
    return any(needle in line for line in bars)


def _relay_idle(app: PtyApp) -> bool:
    return _status_has(app, "relay on") and not _status_has(app, "waiting")


@asynccontextmanager
async def receiver(server: LlamaServer, root: Path, *, warmup: bool) -> AsyncIterator[Receiver]:
    started = await trio.to_thread.run_sync(lambda: _start_receiver(server, root, warmup=warmup))
    try:
        yield started
    finally:
        started.app.terminate()


@attrs.define
class Task:
    name: str
    sender: Instance
    message_id: str
    sent_at: float
    sent: Sent | None = None
    seconds: float = 0.0

    @property
    def state(self) -> str:
        return self.sent.state if self.sent is not None else "unknown"

    @property
    def detail(self) -> str:
        return self.sent.detail if self.sent is not None else ""

    @property
    def ran(self) -> bool:
        """Settled by its turn: completed or blocked, or failed for a reason of the model's
        (SmolLM2 may answer badly), never for the window."""
        if self.state == "failed":
            return "context window" not in self.detail
        return self.state in ("completed", "blocked")


class Senders:
    """Real relay services in this process, a new one after every ``PER_SENDER`` tasks."""

    def __init__(self, nursery: trio.Nursery, root: Path, receiver: Receiver) -> None:
        self._nursery = nursery
        self._root = root
        self._receiver = receiver
        self._current: Instance | None = None
        self._sent = 0
        self.count = 0

    async def _sender(self) -> Instance:
        if self._current is None or self._sent == PER_SENDER:
            self.count += 1
            relay = RelaySettings(dir=self._root / "agents", max_message_chars=MAX_CHARS)
            name = f"send{self.count}"
            self._current = await start(self._nursery, self._root, name, relay=relay)
            self._sent = 0
        return self._current

    async def send(self, name: str, text: str) -> Task:
        """Hand ``text`` to the receiver (stored: ``accepted``) and wait for its final
        receipt; fails, showing the receiver's screen, if none comes in time."""
        sender = await self._sender()
        relay = sender.backend.sends
        pid = self._receiver.app.app_pid
        (peer,) = [p for p in await relay.discover() if p.manifest.pid == pid]
        ack = await relay.deliver(peer, text)
        assert ack.status == "accepted", ack
        self._sent += 1
        *_, sent = relay.outbox.outbox.entries()
        done = Task(name, sender, sent.message_id, time.monotonic())
        with trio.move_on_after(TASK_DEADLINE):
            while not sent.final:  # noqa: ASYNC110 (the receipt arrives on its socket)
                await trio.sleep(0.05)
            done.sent, done.seconds = sent, time.monotonic() - done.sent_at
            print(f"   {name}: {done.state} after {done.seconds:.1f} s", flush=True)
            return done
        raise AssertionError(
            f"{name} is still {sent.state} after {TASK_DEADLINE} s: stuck\n"
            + self._receiver.app.describe()
        )


@attrs.frozen
class ServerFacts:
    """What llama.cpp's log tells of the requests it served."""

    requests: int
    largest_prompt: int
    overflows: int  # requests refused as larger than the window
    truncated: int  # requests whose context was shifted (never, without context shift)

    @classmethod
    def of(cls, log: str) -> ServerFacts:
        # A request's prompt is its tokens at release less those it generated, plus the
        # last generated one, which is never decoded into the cache.
        generated = {int(t): int(n) for t, n in _GENERATED.findall(log)}
        released = _RELEASED.findall(log)
        prompts = [int(n) - generated[int(t)] + 1 for t, n, _ in released if int(t) in generated]
        return cls(
            requests=len(prompts),
            largest_prompt=max(prompts, default=0),
            overflows=log.count(OVERFLOW),
            truncated=sum(flag != "0" for *_, flag in released),
        )


def compactions(session: Session) -> list[TranscriptEvent]:
    return [e for e in session.events if e.role == "system" and e.text.startswith("compacted")]


def report(title: str, lines: list[str]) -> None:
    print(f"\n== {title} ==")
    for line in lines:
        print(f"   {line}")


async def test_relayed_tasks_pass_the_window_and_a_task_too_large_fails_alone(
    server: LlamaServer, short_tmp: Path
) -> None:
    log_from = len(server.full_log())
    async with receiver(server, short_tmp, warmup=True) as recv, trio.open_nursery() as nursery:
        senders = Senders(nursery, short_tmp, recv)
        print()
        began = time.monotonic()
        tasks = [await senders.send(f"task {n + 1}", task(n)) for n in range(TASKS)]
        wall = time.monotonic() - began
        settled = recv.session()
        log_big = len(server.full_log())
        big = await senders.send("oversized task", oversized_task())
        refused = recv.session()
        on_big = ServerFacts.of(server.full_log()[log_big:])
        after = await senders.send("the task after it", task(TASKS))
        # Nothing is left waiting: the status bar says "relay on" without "(N waiting)".
        await trio.to_thread.run_sync(
            lambda: recv.app.wait_until(_relay_idle, "the relay on with nothing waiting")
        )
        nursery.cancel_scope.cancel()
    facts = ServerFacts.of(server.full_log()[log_from:])

    states = [t.state for t in tasks]
    report(
        f"{TASKS} relayed tasks: SmolLM2-135M, llama.cpp n_ctx {N_CTX}, --compact-at 80",
        [
            f"wall time: {wall:.1f} s ({wall / TASKS:.1f} s a task; slowest "
            f"{max(t.seconds for t in tasks):.1f} s); {senders.count} senders",
            f"receipts: {', '.join(f'{s} {states.count(s)}' for s in sorted(set(states)))}",
            f"compactions: {len(compactions(settled))}",
            *(f"  {e.text}" for e in compactions(settled)),
            f"oversized task ({len(oversized_task()):,} chars): {big.state} after "
            f"{big.seconds:.1f} s: {big.detail}",
            f"the task after it: {after.state} after {after.seconds:.1f} s",
            f"llama.cpp: {facts.requests} requests answered, largest prompt "
            f"{facts.largest_prompt} tokens, {facts.overflows} context errors, "
            f"{facts.truncated} truncated",
        ],
    )
    # 1. Every task settled in time (Senders.send fails a stuck one), by its own turn.
    assert [(t.name, t.state, t.detail) for t in tasks if not t.ran] == []
    # The receiver compacted, more than once, and its history starts with the record.
    assert len(compactions(settled)) >= 2, [e.text for e in settled.events]
    assert settled.history[0].content.startswith("<conversation_summary>")
    # 2. The task larger than the window failed at once, naming the window: no summary
    # was spent on it and it left the history as it was; the next one ran.
    assert big.state == "failed" and f"{N_CTX:,}-token context window" in big.detail
    assert on_big.requests == 0, on_big  # refused before any request, so at once
    assert refused.history == settled.history
    assert compactions(refused) == compactions(settled)
    assert after.ran, (after.state, after.detail)
    # No request passed the window: zcoder sized every one.
    assert facts.overflows == 0 and facts.truncated == 0, server.log
    assert 0 < facts.largest_prompt <= N_CTX, facts
    assert OVERFLOW not in recv.debug_log.read_text()


async def test_llama_cpps_own_context_error_settles_the_task_failed_not_waiting(
    server: LlamaServer, short_tmp: Path
) -> None:
    # The error of the failure, from llama.cpp itself: a task whose estimate fits (the
    # receiver, without its warm-up, has the fixed part counted first) but whose tokens
    # do not. zcoder learns the real size from the error and settles the task failed.
    log_from = len(server.full_log())
    async with receiver(server, short_tmp, warmup=False) as recv, trio.open_nursery() as nursery:
        senders = Senders(nursery, short_tmp, recv)
        print()
        dense = await senders.send("digits task", digits_task())
        after = await senders.send("the task after it", task(0))
        nursery.cancel_scope.cancel()
    facts = ServerFacts.of(server.full_log()[log_from:])
    report(
        "llama.cpp's own context error",
        [
            f"digits task: {dense.state} after {dense.seconds:.1f} s: {dense.detail}",
            f"the task after it: {after.state} after {after.seconds:.1f} s",
            f"llama.cpp: {facts.overflows} context error, {facts.requests} requests answered",
        ],
    )
    assert dense.state == "failed" and f"{N_CTX:,}-token context window" in dense.detail
    assert "system prompt" not in dense.detail  # it takes 520 tokens, whatever the task
    # Not waiting: it settled (Senders.send fails a stuck task), after one context error
    # only, the one it learnt from: the retry was judged locally.
    assert facts.overflows == 1
    assert after.ran, (after.state, after.detail)
