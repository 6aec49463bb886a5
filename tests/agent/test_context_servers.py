"""Context management against each server as it really behaves: zcoder's real Agent and
real clients over real HTTP to the fakes, which enforce a window with their own tokenizer
(``tests/fakes/window.py``). The OpenAI-compatible servers refuse an overflowing request
with their exact error body; Ollama's own API silently cuts it, so zcoder must never send
one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.doubles import (
    FakeApprover,
    FakeSession,
    FakeStore,
    FakeToolbox,
    RecordingSink,
    make_config,
)
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.window import Tokenizer
from zcoder.agent.agent import Agent, TurnRequest
from zcoder.agent.context import overflow_of
from zcoder.agent.model import ChatRequest, ModelClient, StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.openai import OpenAIClient
from zcoder.conversation import Message
from zcoder.errors import ModelHTTPError
from zcoder.tools.base import ToolResult

MODEL = "qwen3-coder:latest"
WINDOW = 4096
# A file of 1,700 of the fakes' tokens (1,400 by zcoder's own estimate): a few reads
# fill the window.
FILE = "".join(f"line {n:04d}: some source text of the file being read\n" for n in range(110))
SUMMARY = "Requests: read the files. Decisions: none. Files: f1.py to f9.py, read. Open work: none."
FLAVOURS = {
    "llamacpp": "llama.cpp",
    "vllm": "vLLM",
    "organization_owner": "LM Studio",
    "library": "Ollama",
}
FAST = StallLimits(10, 10)


def play_model(body: dict[str, Any]) -> dict[str, Any]:
    """The model: a warm-up gets one token; a summary request (no tools) a summary; a
    prompt a read of a file; a tool result an answer."""
    options = body.get("options") or {}
    if body.get("max_tokens") == 1 or options.get("num_predict") == 1:
        return {"chunks": [{"content": "Hello"}], "done_reason": "length"}
    if not body.get("tools"):
        return {"chunks": [{"content": SUMMARY}]}
    last = body["messages"][-1]
    if last["role"] == "user":
        path = last["content"].split()[-1] if last["content"].startswith("read") else "x.py"
        return {"chunks": [{"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}]}
    return {"chunks": [{"content": "Read it: nothing to change."}]}


async def read_file(args: Mapping[str, Any]) -> ToolResult:
    return ToolResult(f"{args['path']}:\n{FILE}", summary="read")


def make_agent(client: ModelClient, tmp_path: Path, **config: Any) -> Agent:
    config.setdefault("max_output_tokens", 1024)
    return Agent(
        config=make_config(tmp_path, model=MODEL, **config),
        client=client,
        toolbox=cast(Any, FakeToolbox({"read_file": read_file})),
        approver=FakeApprover(),
        store=cast(Any, FakeStore()),
        session=cast(Any, FakeSession(workspace=tmp_path, model=MODEL)),
        sink=RecordingSink(),
    )


@asynccontextmanager
async def openai_client(fake: FakeOpenAI) -> AsyncIterator[OpenAIClient]:
    async with OpenAIClient(fake.url + "/v1", stall=FAST) as probe:
        kind, _ = await probe.identify()  # as zcoder does at start: the server's kind
    assert kind is not None
    async with OpenAIClient(fake.url + "/v1", kind=kind, stall=FAST) as client:
        yield client


def user(text: str) -> TurnRequest:
    return TurnRequest("user", text)


def system_notes(agent: Agent) -> list[str]:
    return [e.text for e in agent.session.events if e.role == "system"]


def serving(owned_by: str, **options: Any) -> FakeOpenAI:
    return FakeOpenAI(owned_by=owned_by, window=WINDOW, responder=play_model, **options)


@pytest.mark.parametrize("owned_by", list(FLAVOURS))
async def test_each_servers_refusal_reaches_zcoder_with_its_sizes(owned_by: str) -> None:
    request = ChatRequest(
        model=MODEL, messages=[Message("user", "x" * 33_000)], tools=(), num_predict=512
    )
    with serving(owned_by) as fake:
        async with openai_client(fake) as client:
            assert client.kind.name == FLAVOURS[owned_by]
            with pytest.raises(ModelHTTPError) as info:
                async with client.stream_chat(request):
                    pass
    overflow = overflow_of(info.value.server_message)
    assert overflow is not None, info.value.server_message
    if owned_by == "library":  # Ollama names no size
        assert (overflow.prompt_tokens, overflow.window) == (None, None)
    else:
        assert (overflow.prompt_tokens, overflow.window) == (10_003, WINDOW)


def is_summary(request: Mapping[str, Any]) -> bool:
    """A compaction's summary request: the only requests zcoder sends without tools."""
    return not request.get("tools")


def sent_within(fake: FakeOllama, window: int) -> bool:
    """Every request the server answered was inside the window."""
    answered = [
        n for n, o in zip(fake.counted, fake.outcomes, strict=True) if o != "context_exceeded"
    ]
    return max(answered) < window


async def turns(agent: Agent, count: int) -> list[str]:
    return [(await agent.run_turn(user(f"read f{n}.py"))).status for n in range(1, count + 1)]


@pytest.mark.parametrize("owned_by", list(FLAVOURS))
async def test_a_conversation_past_the_window_keeps_working(owned_by: str, tmp_path: Path) -> None:
    with serving(owned_by) as fake:
        async with openai_client(fake) as client:
            agent = make_agent(client, tmp_path)
            await agent.warmup()
            statuses = await turns(agent, 8)
    assert statuses == ["answered"] * 8
    assert sum(n.startswith("compacted") for n in system_notes(agent)) >= 3
    assert any(is_summary(r) for r in fake.requests)
    # The window the server reports (Ollama's /api/ps: once the model is loaded) is kept
    # to: nothing was refused.
    assert "context_exceeded" not in fake.outcomes
    assert sent_within(fake, WINDOW)


@pytest.mark.parametrize("owned_by", ["llamacpp", "vllm", "organization_owner"])
async def test_a_window_the_server_does_not_report_is_learnt_from_its_refusal(
    owned_by: str, tmp_path: Path
) -> None:
    with serving(owned_by, report_window=False) as fake:
        async with openai_client(fake) as client:
            agent = make_agent(client, tmp_path, context_window=2 * WINDOW)
            await agent.warmup()
            statuses = await turns(agent, 8)
    assert statuses == ["answered"] * 8
    # One refusal: its sizes are learnt, the history compacted and the step sent again.
    (refused,) = [i for i, o in enumerate(fake.outcomes) if o == "context_exceeded"]
    assert fake.counted[refused] > WINDOW
    assert is_summary(fake.requests[refused + 1])
    assert fake.outcomes[refused + 2] == "complete" and fake.counted[refused + 2] < WINDOW
    assert fake.requests[refused + 2]["messages"][-1] == fake.requests[refused]["messages"][-1]
    assert sent_within(fake, WINDOW)
    assert any(n.startswith("compacted") for n in system_notes(agent))


async def test_a_refusal_that_names_no_window_is_compacted_and_retried_once(
    tmp_path: Path,
) -> None:
    # Ollama's /v1 with a model it does not list in /api/ps: its refusal says no size, so
    # zcoder keeps its own (too large) window, and each refusal costs one retry.
    with serving("library", report_window=False) as fake:
        async with openai_client(fake) as client:
            agent = make_agent(client, tmp_path, context_window=2 * WINDOW)
            await agent.warmup()
            statuses = await turns(agent, 6)
    assert statuses == ["answered"] * 6
    refused = [i for i, o in enumerate(fake.outcomes) if o == "context_exceeded"]
    assert refused
    for i in refused:
        assert is_summary(fake.requests[i + 1]) and fake.outcomes[i + 2] == "complete"
    assert sent_within(fake, WINDOW)


HUGE = "please look at this:\n" + FILE * 8  # about 13,600 of the fakes' tokens


@pytest.mark.parametrize("warm", [True, False])
@pytest.mark.parametrize("owned_by", list(FLAVOURS))
async def test_one_message_larger_than_the_window_ends_its_turn_at_once(
    owned_by: str, warm: bool, tmp_path: Path
) -> None:
    with serving(owned_by) as fake:
        async with openai_client(fake) as client:
            agent = make_agent(client, tmp_path)
            if warm:
                await agent.warmup()
            before = len(fake.requests)
            huge = await agent.run_turn(user(HUGE))
            during = fake.requests[before:]
            small = await agent.run_turn(user("read f1.py"))
    assert huge.status == "error" and "too large for this window" in huge.error
    if owned_by == "library" and not warm:
        # Ollama lists the window only once the model is loaded, and its refusal names
        # none: the error says so rather than name a window that is not the server's.
        assert "zcoder assumed 16,384 tokens, zcoder's default" in huge.error
        assert "the input length exceeds the context length" in huge.error
        # the system prompt and tools counted (the estimate said to compact), the step,
        # and once more after compacting
        assert len(during) == 3
    else:
        assert f"the model's {WINDOW:,}-token context window" in huge.error
        # Warm, nothing is sent; cold, only the system prompt and tools, to be counted.
        assert len(during) == (0 if warm else 1)
    assert small.status == "answered"
    assert sent_within(fake, WINDOW)


def ollama(**options: Any) -> FakeOllama:
    return FakeOllama(tokenizer=Tokenizer(), responder=play_model, **options)


async def test_ollama_never_truncates_over_a_long_session(tmp_path: Path) -> None:
    with ollama() as fake:
        async with OllamaClient(fake.url, stall=FAST) as client:
            agent = make_agent(client, tmp_path, context_window=WINDOW)
            await agent.warmup()
            statuses = await turns(agent, 12)
            huge = await agent.run_turn(user(HUGE))
            after = await agent.run_turn(user("read f1.py"))
    assert statuses == ["answered"] * 12
    assert huge.status == "error" and f"the model's {WINDOW:,}-token context window" in huge.error
    assert after.status == "answered"
    assert {r["options"]["num_ctx"] for r in fake.requests} == {WINDOW}
    assert sum(n.startswith("compacted") for n in system_notes(agent)) >= 5
    assert len(fake.truncated) == len(fake.requests) and not any(fake.truncated)


async def test_ollama_never_gets_a_first_message_larger_than_its_window(tmp_path: Path) -> None:
    # No warm-up (one-shot mode, or a turn that stopped it): the first request is sized
    # before Ollama counted any; it must not be sent to learn its size, as Ollama would
    # cut it silently (and answer from what is left).
    with ollama() as fake:
        async with OllamaClient(fake.url, stall=FAST) as client:
            agent = make_agent(client, tmp_path, context_window=WINDOW)
            huge = await agent.run_turn(user(HUGE))
            after = await agent.run_turn(user("read f1.py"))
    assert huge.status == "error" and f"the model's {WINDOW:,}-token context window" in huge.error
    assert after.status == "answered"
    assert fake.outcomes[0] == "warmup"  # the fixed part, counted
    assert not any(fake.truncated), fake.counted


async def test_ollama_warm_up_of_a_resumed_session_larger_than_its_window_is_never_cut(
    tmp_path: Path,
) -> None:
    with ollama() as fake:
        async with OllamaClient(fake.url, stall=FAST) as client:
            agent = make_agent(client, tmp_path, context_window=WINDOW)
            agent.session.history.extend(
                [Message("user", "look at this:\n" + FILE * 3), Message("assistant", "Seen.")]
            )
            await agent.warmup()
            outcome = await agent.run_turn(user("read f1.py"))
    assert outcome.status == "answered"
    assert fake.outcomes[0] == "warmup" and fake.counted[0] < WINDOW
    assert not any(fake.truncated), fake.counted
