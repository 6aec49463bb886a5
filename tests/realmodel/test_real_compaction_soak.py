"""A soak of relayed tasks through SmolLM2 with the tools template: compaction keeps its floor.

SmolLM2-135M behind llama.cpp with a 4,096-token window and the ChatML template that renders
the tool schemas (so the fixed part of every request is large, as in the report: each
compaction there left 3.67-3.95K tokens, rising task by task, and the next task had about
120 tokens of room). Relayed tasks run one after another on one agent, in this process. Forty
short tasks do not fit in reasonable time on a 2-core machine (with other work on it, four
took 128 s), so the tasks are long (ten paragraphs, about 700 tokens each) and few: the
window fills every two or three tasks, and ``TASKS`` of them compact twice. After
every compaction, llama.cpp's own count of the next request, less its count of the fixed
part, is the compacted history: it stays at or under half the window, and the record's
summary stays within its cap.

Run with ``pytest -s`` for the figures.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import attrs
import pytest

from tests.agent.doubles import FakeApprover, FakeSession, FakeStore, RecordingSink, make_config
from tests.realmodel.llama_server import LlamaServer
from tests.realmodel.test_real_compaction import paragraph
from zcoder.agent.agent import Agent, TurnRequest
from zcoder.agent.compaction import SUMMARY_OPEN
from zcoder.agent.model import ChatChunk, ChatRequest, ClientWrapper
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.turns import RelaySender
from zcoder.approval.questions import Answer
from zcoder.conversation import Message
from zcoder.live import Entry
from zcoder.tools.registry import Toolbox, core_tools

# About 12K prompt tokens in all: minutes on a 2-core machine (919 s with other work on it).
pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(1200)]

N_CTX = 4096
TASKS = 7
PARAGRAPHS = 10  # a task's length: about 70 tokens a paragraph
OUTPUT_CAP = 32
SENDER = RelaySender("4000-1", 4000, "other-project", "/work/other", True)
DENY: Answer = "n"


@attrs.frozen
class Served:
    """One request and llama.cpp's count of its prompt."""

    summary: bool  # a compaction's summary request (no tools)
    probe: bool  # a one-token request (the warm-up or a count)
    prompt_tokens: int


class Counted(ClientWrapper):
    """Notes every request and the server's count of its prompt."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.served: list[Served] = []

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        async with self._inner.stream_chat(request) as chunks:

            async def counted() -> AsyncIterator[ChatChunk]:
                prompt = 0
                async for chunk in chunks:
                    prompt = chunk.prompt_eval_count or prompt
                    yield chunk
                probe = request.num_predict == 1
                self.served.append(Served(not request.tools, probe, prompt))

            yield counted()


async def _fixed_tokens(client: OpenAIClient, request: ChatRequest) -> int:
    """llama.cpp's count of the system prompt and the tool schemas with a one-word prompt."""
    one = attrs.evolve(request, messages=[request.messages[0], Message("user", "Hi")])
    prompt = 0
    async with client.stream_chat(attrs.evolve(one, num_predict=1)) as chunks:
        async for chunk in chunks:
            prompt = chunk.prompt_eval_count or prompt
    return prompt


class LastRequest(ClientWrapper):
    """Keeps the last step request (with tools), for the fixed part's count."""

    last: ChatRequest | None = None

    def stream_chat(self, request: ChatRequest) -> Any:
        if request.tools:
            self.last = request
        return self._inner.stream_chat(request)


async def test_compaction_keeps_its_floor_over_many_relayed_tasks(
    tool_server: LlamaServer, tmp_path: Path
) -> None:
    session = FakeSession(workspace=tmp_path)
    sink = RecordingSink()
    config = make_config(
        tmp_path,
        model="smollm2",
        host=tool_server.url,
        temperature=0.0,
        max_output_tokens=OUTPUT_CAP,
        context_window=N_CTX,
    )
    async with OpenAIClient(f"{tool_server.url}/v1") as raw:
        counted = Counted(raw)
        last = LastRequest(counted)
        agent = Agent(
            config=config,
            client=last,
            toolbox=Toolbox(core_tools()),
            approver=FakeApprover(*[DENY] * 200),  # a command it asks for does not run
            store=cast(Any, FakeStore()),
            session=cast(Any, session),
            sink=sink,
        )
        await agent.warmup()
        began = time.monotonic()
        after: list[int] = []  # the compacted history, as llama.cpp counted it
        records: list[int] = []  # the record's length in characters
        ran = 0
        while ran < TASKS:
            first = len(counted.served)
            body = "\n\n".join(paragraph(ran * PARAGRAPHS + i) for i in range(PARAGRAPHS))
            text = f"Summarise in one sentence:\n\n{body}"
            outcome = await agent.run_turn(TurnRequest("relay", text, sender=SENDER))
            ran += 1
            served = counted.served[first:]
            summaries = [i for i, s in enumerate(served) if s.summary]
            if summaries:
                step = next(s for s in served[summaries[-1] + 1 :] if not s.probe)
                after.append(step.prompt_tokens)
                records.append(len(session.history[0].content))
            largest = max((s.prompt_tokens for s in served), default=0)
            compacted = f", the request after it {after[-1]} tokens" if summaries else ""
            print(
                f"   task {ran}: {outcome.status} at {time.monotonic() - began:.0f} s, "
                f"largest prompt {largest}, {len(summaries)} summary requests{compacted}",
                flush=True,
            )
        seconds = time.monotonic() - began
        assert last.last is not None
        fixed = await _fixed_tokens(raw, last.last)
    compactions = [
        e.event.text
        for e in sink.of(Entry)
        if e.event.role == "system" and e.event.text.startswith("compacted")
    ]
    history = [a - fixed for a in after]
    print(
        f"\n== {ran} relayed tasks of {PARAGRAPHS} paragraphs in {seconds:.0f} s: "
        f"SmolLM2-135M, tools template, n_ctx {N_CTX} ==\n"
        f"   fixed part (system prompt and tool schemas): {fixed} tokens\n"
        f"   compactions: {len(compactions)}\n"
        + "".join(f"     {line}\n" for line in compactions)
        + f"   request after each compaction: {after} tokens\n"
        f"   compacted history (less the fixed part): {history} tokens "
        f"(floor: {N_CTX // 2})\n"
        f"   record: {records} characters"
    )
    assert len(compactions) >= 2, "the soak compacted less than twice: the floor is untested"
    assert session.history[0].content.startswith(SUMMARY_OPEN)
    assert all(h <= N_CTX // 2 for h in history), history
    # the summary is bounded: the record never grows past its caps, however many tasks
    assert max(records) <= 4 * 1024 + N_CTX // 10 * 4 + 600, records
