"""Compaction benchmark: a long session in a small window (prints figures; not a test).

Run ``python -m bench.compaction [--turns 300] [--window 4096] [--compact-at 80] [--vllm]``.

zcoder's real ``Agent`` drives a session of ``--turns`` turns against an in-process fake
server (a ``ModelClient``) that counts every prompt with its own tokenizer (3.3 characters
a token, a few tokens of template per message and per tool call, the tool schemas
included: not zcoder's four characters a token), reports the count as
``prompt_eval_count``, refuses a prompt larger than its window as llama.cpp does
(``--vllm``: a prompt plus its output cap, as vLLM does), and takes time as a server
would, scaled down: each prompt token it has not cached (one prefix-cache slot, as a
llama.cpp slot or an Ollama runner keeps) and each output token costs a few microseconds.
The session is a seeded mix of plain questions, reads (``read_file`` results of 0.4 to
2.4 KB, the same files read again later), edits (read, ``write_file``, the tests run,
``finish``) and relayed tasks (a ``TurnRequest`` from a ``RelaySender``: the tests run, a
reply sent, ``finish``).

A request without tools is a summary request (zcoder's compaction asks the model with no
tools); every other one is a step of a turn. Printed: the window and threshold; per kind
of request the largest, p95 and median prompt as the server counted it, how many passed
the threshold and by how much, how many the server refused, and how many asked for a
prompt plus output cap past the window (what vLLM refuses); the compactions; and per 100
turns the time the summary requests took beside the time of the turns' own requests and
zcoder's own time (the rest of the turns' wall time). The baseline, in the same run, is
the same session with a window too large to need any compaction.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import shutil
import statistics
import tempfile
import time
import zlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import attrs
import trio

from tests.agent.doubles import FakeSession, FakeToolbox, make_config
from zcoder.agent.agent import Agent
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.agent.servers import GENERIC, LLAMA_CPP, kind_named
from zcoder.agent.turns import RelaySender, TurnRequest
from zcoder.approval.questions import Answer, ApprovalRequest
from zcoder.conversation import Message, ToolCall
from zcoder.errors import ModelHTTPError
from zcoder.live import ContextFill, Entry, LiveEvent
from zcoder.tools.base import ToolResult

CHARS_PER_TOKEN = 3.3  # the fake server's tokenizer (zcoder estimates four)
MESSAGE_TOKENS = 5  # the chat template's role markers and separators, per message
CALL_TOKENS = 6  # per tool call
PROMPT_SECONDS = 2e-6  # per prompt token not in the cache: 500,000 tokens/s
OUTPUT_SECONDS = 4e-5  # per output token: 25,000 tokens/s
BASELINE_WINDOW = 2_097_152  # the largest --context-window: nothing to compact
BLOCK = 100  # turns per line of the time table
SENDERS = (
    RelaySender("42110-777", 42110, "user-profiles", "/work/app/user-profiles", True),
    RelaySender("51730-204", 51730, "weekly-digest", "/work/app/weekly-digest", True),
)
_VOCABULARY = (
    "user profile digest weekly render cache token window session relay config parse value "
    "index record entry result error status request handler module display name field "
    "check update build test store load save merge item list"
)
_WORDS = tuple(_VOCABULARY.split())


# -- the session ------------------------------------------------------------------------


@attrs.frozen
class Step:
    """One reply of the model in a turn: text, or tool calls (with optional text)."""

    content: str = ""
    calls: tuple[ToolCall, ...] = ()


@attrs.frozen
class Planned:
    """One turn of the session: what is asked, and the model's replies, in order."""

    kind: str  # chat, read, edit, relay
    request: TurnRequest
    steps: tuple[Step, ...]


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))
        out.append(sentence.capitalize() + ".")
        size += len(sentence) + 2
    return " ".join(out)


def _code(rng: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        a, b, c = (rng.choice(_WORDS) for _ in range(3))
        if rng.random() < 0.15:
            line = f"\ndef {a}_{b}({c}: str, limit: int = {rng.randint(1, 99)}) -> list[str]:"
        else:
            line = f"    {a}_{b} = {c}.{rng.choice(_WORDS)}({a}, {rng.randint(0, 999)})"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _test_log(rng: random.Random, chars: int) -> str:
    lines = ["Exit code: 0", "============ test session starts ============"]
    size = 60
    while size < chars:
        line = f"tests/test_{rng.choice(_WORDS)}.py {'.' * rng.randint(5, 40)}"
        lines.append(f"{line:60} [{rng.randint(1, 99):3}%]")
        size += 68
    lines.append(f"============ {rng.randint(20, 400)} passed in 1.{rng.randint(10, 99)}s ====")
    return "\n".join(lines)


class Workspace:
    """The files the session reads and the outputs of its commands (fixed by a seed)."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.files = {
            f"src/app/{rng.choice(_WORDS)}_{n}.py": _code(rng, rng.randint(400, 2400))
            for n in range(30)
        }
        self.seed = seed

    def toolbox(self) -> FakeToolbox:
        async def read(args: Mapping[str, Any]) -> ToolResult:
            return ToolResult(self.files[str(args["path"])], summary="read")

        async def write(args: Mapping[str, Any]) -> ToolResult:
            return ToolResult(f"Wrote {len(str(args['content']))} characters to {args['path']}.")

        async def run(args: Mapping[str, Any]) -> ToolResult:
            rng = random.Random(zlib.crc32(str(args["command"]).encode()) ^ self.seed)
            return ToolResult(_test_log(rng, rng.randint(300, 1200)), summary="ran")

        async def send(args: Mapping[str, Any]) -> ToolResult:
            return ToolResult(f"accepted: message queued for {args['target_instance_id']}")

        handlers = {
            "read_file": read,
            "write_file": write,
            "run_command": run,
            "send_agent_message": send,
        }
        return FakeToolbox(handlers, send=True)


def plan_session(turns: int, work: Workspace, seed: int) -> list[Planned]:
    """A seeded mix: a quarter plain questions, about a third reads, a quarter edits and
    the rest relayed tasks."""
    rng = random.Random(seed)
    paths = list(work.files)
    out: list[Planned] = []
    for n in range(turns):
        roll = rng.random()
        path = rng.choice(paths)
        tests = f"python -m pytest tests/test_{path.rsplit('/', 1)[1]} -q -k case{n}"
        if roll < 0.25:
            ask = f"Question {n}: " + _prose(rng, rng.randint(60, 250))
            steps: list[Step] = [Step(_prose(rng, rng.randint(200, 900)))]
            out.append(Planned("chat", TurnRequest("user", ask), tuple(steps)))
        elif roll < 0.6:
            ask = f"Request {n}: explain {path}. " + _prose(rng, rng.randint(40, 160))
            steps = [Step("Let me look.", (ToolCall("read_file", {"path": path}),))]
            if rng.random() < 0.3:
                other = rng.choice(paths)
                steps.append(Step("", (ToolCall("read_file", {"path": other}),)))
            steps.append(Step(_prose(rng, rng.randint(300, 800))))
            out.append(Planned("read", TurnRequest("user", ask), tuple(steps)))
        elif roll < 0.85:
            ask = f"Change {n}: in {path}, " + _prose(rng, rng.randint(40, 160))
            new = _code(rng, rng.randint(300, 1200))
            steps = [
                Step("", (ToolCall("read_file", {"path": path}),)),
                Step("", (ToolCall("write_file", {"path": path, "content": new}),)),
                Step("", (ToolCall("run_command", {"command": tests}),)),
                Step("", (_finish(_prose(rng, rng.randint(120, 400))),)),
            ]
            out.append(Planned("edit", TurnRequest("user", ask), tuple(steps)))
        else:
            sender = rng.choice(SENDERS)
            task = f"Relayed {n}: check {path} against our API. " + _prose(rng, 120)
            reply = {"target_instance_id": sender.instance_id, "message": _prose(rng, 160)}
            steps = [
                Step("", (ToolCall("run_command", {"command": tests}),)),
                Step("", (ToolCall("send_agent_message", reply),)),
                Step("", (_finish(_prose(rng, rng.randint(100, 300))),)),
            ]
            out.append(Planned("relay", TurnRequest("relay", task, sender=sender), tuple(steps)))
    return out


def _finish(response: str) -> ToolCall:
    return ToolCall("finish", {"status": "complete", "response": response})


# -- the fake server --------------------------------------------------------------------


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def message_tokens(message: Message) -> int:
    """A message as the fake server's tokenizer counts it (the thinking is not sent)."""
    tokens = MESSAGE_TOKENS + _tokens(len(message.content))
    for call in message.tool_calls:
        tokens += CALL_TOKENS + _tokens(len(call.name) + len(json.dumps(dict(call.arguments))))
    return tokens


@attrs.define
class Served:
    """One request as the server saw it."""

    turn: int
    summary: bool  # no tools: one of compaction's summary requests
    prompt: int
    cached: int = 0
    output: int = 0
    cap: int = 0
    seconds: float = 0.0
    refused: bool = False
    fixed: int = 0  # the tool schemas and the system message


class FakeServer:
    """An in-process llama.cpp-like ``ModelClient``: counts prompts, keeps one prefix-cache
    slot, refuses a prompt over its window (``vllm``: a prompt plus its output cap, as vLLM
    does), and takes simulated time per token. Turn steps come from ``steps``; a summary
    request is answered with a record of half to four fifths of its output cap."""

    def __init__(self, window: int, seed: int, *, vllm: bool = False) -> None:
        self.kind = (kind_named("vLLM") or GENERIC) if vllm else LLAMA_CPP
        self.window = window
        self.vllm = vllm
        self.steps: deque[Step] = deque()
        self.served: list[Served] = []
        self.turn = 0
        self._cache: list[tuple[object, int]] = []
        self._rng = random.Random(seed)

    async def context_length(self, model: str) -> int | None:
        await trio.lowlevel.checkpoint()
        return self.window

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo("m")]

    async def aclose(self) -> None:
        pass

    def _parts(self, request: ChatRequest) -> list[tuple[object, int]]:
        tools = json.dumps(list(request.tools)) if request.tools else ""
        parts: list[tuple[object, int]] = [(tools, _tokens(len(tools)))]
        parts += [(m, message_tokens(m)) for m in request.messages]
        return parts

    def _reuse(self, parts: list[tuple[object, int]]) -> int:
        """The prompt tokens the cache already holds (the common prefix with the last
        prompt); the cache then holds this prompt."""
        cached = 0
        for (key, tokens), (old, _) in zip(parts, self._cache, strict=False):
            if key != old:
                break
            cached += tokens
        self._cache = parts
        return cached

    def _summary(self, cap: int) -> Step:
        chars = int(cap * self._rng.uniform(0.5, 0.8) * CHARS_PER_TOKEN)
        head = "Requests: the user asked for explanations and edits of src/app; relayed tasks "
        return Step(head + _prose(self._rng, chars - len(head)))

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        start = time.perf_counter()
        parts = self._parts(request)
        prompt = sum(tokens for _, tokens in parts)
        summary = not request.tools
        cap = request.num_predict or 4096
        served = Served(self.turn, summary, prompt, cap=cap, fixed=parts[0][1] + parts[1][1])
        self.served.append(served)
        await trio.lowlevel.checkpoint()
        if self.vllm and prompt + cap > self.window:
            served.refused = True
            raise ModelHTTPError(
                400,
                f"This model's maximum context length is {self.window} tokens. However, you "
                f"requested {prompt + cap} tokens ({prompt} in the messages, {cap} in the "
                "completion). Please reduce the length of the messages or completion.",
            )
        if prompt > self.window:
            served.refused = True
            raise ModelHTTPError(
                400,
                f"request ({prompt} tokens) exceeds the available context size "
                f"({self.window} tokens), try increasing it",
            )
        served.cached = self._reuse(parts)
        step = self._summary(cap) if summary else self.steps.popleft()
        try:
            async with aclosing(self._chunks(served, step)) as chunks:
                yield chunks
        finally:
            served.seconds = time.perf_counter() - start

    async def _chunks(self, served: Served, step: Step) -> AsyncGenerator[ChatChunk, None]:
        await trio.sleep((served.prompt - served.cached) * PROMPT_SECONDS)
        calls = sum(len(json.dumps(dict(c.arguments))) for c in step.calls)
        output = _tokens(len(step.content) + calls)
        content, reason = step.content, "stop"
        if output > served.cap:  # the output cap cuts the reply
            content = content[: int(served.cap * CHARS_PER_TOKEN)]
            output, reason = served.cap, "length"
        served.output = output
        await trio.sleep(output * OUTPUT_SECONDS)
        yield ChatChunk(content=content, tool_calls=step.calls)
        yield ChatChunk(
            done=True, done_reason=reason, prompt_eval_count=served.prompt, eval_count=output
        )


# -- the agent around it ----------------------------------------------------------------


class Yes:
    """Approves every question (commands, relay replies)."""

    async def ask(self, request: ApprovalRequest) -> Answer:
        await trio.lowlevel.checkpoint()
        return "y"


class NullStore:
    async def save_async(self, session: FakeSession) -> bool:
        await trio.lowlevel.checkpoint()
        return True

    def save(self, session: FakeSession) -> None:
        pass


@attrs.define
class Sink:
    """Notes the compactions (``compacted ...`` entries, by turn) and the largest context
    fill zcoder showed."""

    turn: int = 0
    compactions: list[tuple[int, str]] = attrs.Factory(list)
    fill: int = 0

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, ContextFill):
            self.fill = max(self.fill, event.tokens)
        if not isinstance(event, Entry):
            return
        entry = event.event
        if entry.role == "system" and entry.text.startswith("compacted"):
            self.compactions.append((self.turn, entry.text))


@attrs.frozen
class Run:
    window: int
    threshold: int
    served: list[Served]
    walls: list[float]  # per turn
    compactions: list[tuple[int, str]]
    errors: list[str]
    fill: int
    unused_steps: int


async def run_session(
    session_plan: Sequence[Planned],
    work: Workspace,
    window: int,
    compact_at: int,
    root: Path,
    *,
    vllm: bool = False,
) -> Run:
    workspace = root / f"ws{window}"
    workspace.mkdir()
    server = FakeServer(window, seed=11, vllm=vllm)
    sink = Sink()
    config = make_config(
        workspace, context_window=window, compact_at=compact_at, command_policy="allow"
    )
    agent = Agent(
        config=config,
        client=server,
        toolbox=cast(Any, work.toolbox()),
        approver=Yes(),
        store=cast(Any, NullStore()),
        session=cast(Any, FakeSession(workspace=workspace)),
        sink=sink,
    )
    walls: list[float] = []
    errors: list[str] = []
    unused = 0
    for n, planned in enumerate(session_plan):
        server.turn = sink.turn = n
        server.steps = deque(planned.steps)
        start = time.perf_counter()
        outcome = await agent.run_turn(planned.request)
        walls.append(time.perf_counter() - start)
        if outcome.status not in ("answered", "complete"):
            errors.append(f"turn {n + 1} ({planned.kind}): {outcome.status}: {outcome.error}")
        unused += len(server.steps)
    threshold = window * compact_at // 100
    return Run(window, threshold, server.served, walls, sink.compactions, errors, sink.fill, unused)


# -- the figures ------------------------------------------------------------------------


def pct(values: Sequence[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def prompt_row(name: str, served: Sequence[Served], threshold: int, window: int) -> str:
    counted = [s.prompt for s in served if not s.refused]
    if not counted:
        return f"  {name:26}{0:>9}"
    over = [p - threshold for p in counted if p > threshold]
    past = f"{len(over)} (max +{max(over):,})" if over else "0"
    refused = sum(s.refused for s in served)
    cap_over = sum(s.prompt + s.cap > window for s in served if not s.refused)
    return (
        f"  {name:26}{len(served):>9,}{max(counted):>10,}{pct(counted, 95):>9,}"
        f"{statistics.median(counted):>9,.0f}  {past:>16}{refused:>9}{cap_over:>11}"
    )


def print_prompts(runs: Sequence[tuple[str, Run]]) -> None:
    print()
    print("prompt tokens per request, as the server counted them")
    print(
        f"  {'':26}{'requests':>9}{'max':>10}{'p95':>9}{'median':>9}  "
        f"{'past threshold':>16}{'refused':>9}{'prompt+cap':>11}"
    )
    for name, run in runs:
        steps = [s for s in run.served if not s.summary]
        summaries = [s for s in run.served if s.summary]
        print(prompt_row(f"{name}: turn steps", steps, run.threshold, run.window))
        if summaries:
            print(prompt_row(f"{name}: summaries", summaries, run.threshold, run.window))
    print(
        "  (past threshold: counted prompts over it, and by how much; refused: prompts over "
        "the window;\n   prompt+cap: prompt plus the request's output cap over the window)"
    )


def print_compactions(run: Run, turns: int) -> None:
    summarised = [t for t, text in run.compactions if "messages" in text]
    trimmed = len(run.compactions) - len(summarised)
    fallback = sum("no summary from the model" in text for _, text in run.compactions)
    summaries = sum(s.summary for s in run.served)
    per_turn: dict[int, int] = {}
    for turn, _ in run.compactions:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    turns_with = sorted(per_turn)
    gaps = [b - a for a, b in itertools.pairwise(turns_with)]
    gap = f"{statistics.median(gaps):.0f}" if gaps else "-"
    print()
    print(
        f"compactions: {len(run.compactions)} in {turns} turns ({len(summarised)} summarised "
        f"with {summaries} summary requests, {trimmed} trimmed only, {fallback} fell back to "
        f"zcoder's own record)"
    )
    most = max(per_turn.values(), default=0)
    print(
        f"  turns that compacted: {len(turns_with)}; median turns between them: {gap}; "
        f"most in one turn: {most}"
    )


def print_times(runs: Sequence[tuple[str, Run]], turns: int) -> None:
    print()
    print(f"time per {BLOCK} turns (s): the turns' own requests, compacting (the summary")
    print("requests) and zcoder's own time (the rest of the turns' wall time)")
    header = "".join(
        f"{name + ': requests':>22}{'compacting':>12}{'zcoder':>9}" for name, _ in runs
    )
    print(f"  {'turns':12}{header}")
    rows = [
        (f"{b + 1}-{min(b + BLOCK, turns)}", b, min(b + BLOCK, turns))
        for b in range(0, turns, BLOCK)
    ]
    if turns > BLOCK:
        rows.append(("all", 0, turns))
    for label, begin, end in rows:
        cells = []
        for _, run in runs:
            block = [s for s in run.served if begin <= s.turn < end]
            own = sum(s.seconds for s in block if not s.summary)
            compacting = sum(s.seconds for s in block if s.summary)
            rest = sum(run.walls[begin:end]) - own - compacting
            cells.append(f"{own:>22.2f}{compacting:>12.2f}{rest:>9.2f}")
        print(f"  {label:12}{''.join(cells)}")


def print_run(
    turns: int, session_plan: Sequence[Planned], compacted: Run, base: Run, vllm: bool
) -> None:
    kinds = {k: sum(p.kind == k for p in session_plan) for k in ("chat", "read", "edit", "relay")}
    steps = sum(len(p.steps) for p in session_plan)
    print(
        f"compaction: {turns} turns ({', '.join(f'{v} {k}' for k, v in kinds.items())}), "
        f"{steps} model steps planned"
    )
    print(
        f"fake server: {CHARS_PER_TOKEN} chars a token, {1 / PROMPT_SECONDS:,.0f} uncached "
        f"prompt tokens/s, {1 / OUTPUT_SECONDS:,.0f} output tokens/s, one prefix-cache slot"
    )
    refuses = "a prompt plus its output cap (vLLM)" if vllm else "a prompt (llama.cpp)"
    print(f"  it refuses {refuses} over the window")
    print(
        f"  window {compacted.window:,}, compact at {compacted.threshold:,} tokens; baseline "
        f"window {base.window:,} (no compaction)"
    )
    fixed = max((s.fixed for s in compacted.served if not s.summary), default=0)
    print(
        f"  system prompt and tool schemas: up to {fixed:,} tokens; the status bar's largest "
        f"ctx {compacted.fill:,} (baseline {base.fill:,})"
    )
    runs = [("compacted", compacted), ("baseline", base)]
    print_prompts(runs)
    print_compactions(compacted, turns)
    if base.compactions:
        print(f"  baseline compactions: {len(base.compactions)} (expected none)")
    print_times(runs, turns)
    for name, run in runs:
        total = sum(run.walls)
        print(f"  {name}: {total:.2f} s in all, {1000 * total / turns:.1f} ms a turn")
    for name, run in runs:
        if run.errors or run.unused_steps:
            print(f"\n{name}: {len(run.errors)} turns did not end well:")
            for line in run.errors[:10]:
                print(f"  {line[:200]}")
            print(f"  model steps planned but never asked for: {run.unused_steps}")


async def bench(turns: int, window: int, compact_at: int, vllm: bool, root: Path) -> None:
    work = Workspace(seed=3)
    session_plan = plan_session(turns, work, seed=5)
    compacted = await run_session(session_plan, work, window, compact_at, root, vllm=vllm)
    base = await run_session(session_plan, work, BASELINE_WINDOW, compact_at, root, vllm=vllm)
    print_run(turns, session_plan, compacted, base, vllm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--compact-at", type=int, default=80)
    parser.add_argument(
        "--vllm",
        action="store_true",
        help="the server refuses a prompt plus its output cap over the window, as vLLM does",
    )
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zbc"))
    try:
        trio.run(bench, opts.turns, opts.window, opts.compact_at, opts.vllm, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
