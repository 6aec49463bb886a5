"""OpenAIClient against the fake OpenAI-compatible server (a real HTTP server speaking SSE):
the same success and failure modes as OllamaClient's tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from tests.agent.test_ollama import HELLO, MODEL, CountingTransport
from tests.fakes.openai_server import FakeOpenAI
from zcoder.agent.model import ChatChunk, ChatRequest, ModelClient, ModelInfo, StallLimits
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.rounds import describe_model_error
from zcoder.agent.servers import GENERIC, LLAMA_CPP, kind_named
from zcoder.conversation import Message, ToolCall
from zcoder.errors import (
    IncompleteStream,
    MalformedStream,
    ModelHTTPError,
    ServerUnavailable,
    StreamErrorLine,
    StreamStalled,
)

# The same script, model and attempt counter as the Ollama client's tests: one contract.


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({"responses": [{"chunks": HELLO}]}) as server:
        yield server


def v1(fake: FakeOpenAI) -> str:
    return fake.url + "/v1"


def request(model: str = MODEL, **kwargs: Any) -> ChatRequest:
    return ChatRequest(model=model, messages=[Message("user", "hi")], **kwargs)


async def collect(client: ModelClient, req: ChatRequest | None = None) -> list[ChatChunk]:
    async with client.stream_chat(req or request()) as chunks:
        return [chunk async for chunk in chunks]


async def outcomes(fake: FakeOpenAI, count: int) -> list[str]:
    return await trio.to_thread.run_sync(fake.wait_for_outcomes, count)


def script(**response: Any) -> dict[str, Any]:
    return {"responses": [{"chunks": HELLO, **response}]}


VLLM = kind_named("vLLM") or LLAMA_CPP


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_is_a_model_client() -> None:
    client: ModelClient = OpenAIClient("http://127.0.0.1:1/v1", kind=LLAMA_CPP)
    assert client.kind.name == "llama.cpp"


def test_rejects_non_positive_deadlines() -> None:
    with pytest.raises(ValueError, match="stall limits must be positive"):
        OpenAIClient("http://127.0.0.1:1/v1", stall=StallLimits(0, 0))
    with pytest.raises(ValueError, match="connect_seconds"):
        OpenAIClient("http://127.0.0.1:1/v1", connect_seconds=0)


def test_the_api_key_is_in_no_repr() -> None:
    client = OpenAIClient("http://127.0.0.1:1/v1", api_key="sk-secret")
    assert "sk-secret" not in repr(client)
    assert "sk-secret" not in repr(vars(client))


async def test_streams_reasoning_content_tool_calls_and_usage() -> None:
    call = {"name": "read_file", "arguments": {"path": "a.py"}, "id": "call_7"}
    body = {"chunks": [*HELLO, {"tool_calls": [call]}], "prompt_eval_count": 42, "eval_count": 7}
    with FakeOpenAI({"responses": [body]}) as fake:
        async with OpenAIClient(v1(fake)) as client:
            got = await collect(client)
    assert got == [
        ChatChunk(thinking="hmm"),
        ChatChunk(content="Hel"),
        ChatChunk(content="lo"),
        ChatChunk(tool_calls=(ToolCall("read_file", {"path": "a.py"}, id="call_7"),)),
        ChatChunk(done=True, done_reason="tool_calls", prompt_eval_count=42, eval_count=7),
    ]


async def test_several_calls_are_assembled_by_index() -> None:
    calls = [
        {"name": "read_file", "arguments": {"path": "a.py", "limit": 20}},
        {"name": "list_dir", "arguments": ""},
    ]
    with FakeOpenAI({"responses": [{"chunks": [{"tool_calls": calls}]}]}) as fake:
        async with OpenAIClient(v1(fake)) as client:
            got = await collect(client)
    [whole] = [c for c in got if c.tool_calls]
    assert [(t.name, dict(t.arguments), t.id) for t in whole.tool_calls] == [
        ("read_file", {"path": "a.py", "limit": 20}, "call_fake0"),
        ("list_dir", {}, "call_fake1"),
    ]


@pytest.mark.parametrize("arguments", ["[1, 2]", '{"path": "a.py"', '"text"'])
async def test_arguments_not_an_object_reach_the_loop_as_a_problem(arguments: str) -> None:
    calls = [{"name": "read_file", "arguments": arguments}]
    with FakeOpenAI({"responses": [{"chunks": [{"tool_calls": calls}]}]}) as fake:
        async with OpenAIClient(v1(fake)) as client:
            got = await collect(client)
    [call] = [c for chunk in got for c in chunk.tool_calls]
    assert (call.name, dict(call.arguments)) == ("read_file", {})
    assert call.problem.startswith("the arguments are not ")


async def test_finish_reason_length_is_passed_on() -> None:
    with FakeOpenAI(script(done_reason="length")) as fake:
        async with OpenAIClient(v1(fake)) as client:
            got = await collect(client)
    assert got[-1].done and got[-1].done_reason == "length"


async def test_unknown_model_names_the_servers_fix_not_ollama_pull() -> None:
    with FakeOpenAI(script(), owned_by="vllm", check_model=True, error_shape="vllm") as fake:
        async with OpenAIClient(v1(fake), kind=VLLM) as client:
            with pytest.raises(ModelHTTPError) as info:
                await collect(client, request("llama9:7b"))
    assert (info.value.status, info.value.model_missing) == (404, True)
    assert info.value.server_message == "The model `llama9:7b` does not exist."
    line = describe_model_error(info.value, client.kind, "http://h/v1", "llama9:7b")
    assert line.startswith("model 'llama9:7b' not found on vLLM: vLLM serves only the model")
    assert "ollama" not in line.lower()


@pytest.mark.parametrize(("status", "error"), [(400, "bad tools"), (500, "llama runner crashed")])
async def test_http_error_carries_server_text_and_is_not_retried(status: int, error: str) -> None:
    with FakeOpenAI(script(status=status, error=error)) as fake:
        transport = CountingTransport()
        async with OpenAIClient(v1(fake), kind=LLAMA_CPP, transport=transport) as client:
            with pytest.raises(ModelHTTPError) as info:
                await collect(client)
    assert (info.value.status, info.value.server_message) == (status, error)
    assert transport.attempts == 1
    line = describe_model_error(info.value, client.kind, "http://h/v1", MODEL)
    assert line == f"llama.cpp error (HTTP {status}): {error}"


async def test_server_down_is_unavailable_after_exactly_one_retry() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    transport = CountingTransport()
    async with OpenAIClient(url, kind=LLAMA_CPP, transport=transport) as client:
        with pytest.raises(ServerUnavailable) as info:
            await collect(client)
    assert transport.attempts == 2
    assert str(info.value) == (
        f"cannot reach llama.cpp at {url} (connection refused); "
        "is `llama-server -m MODEL.gguf` running?"
    )
    line = describe_model_error(info.value, client.kind, url, MODEL)
    assert line.startswith(f"llama.cpp is not reachable at {url} (connection refused)")
    assert "ollama" not in line


async def test_connection_closed_before_response_is_retried_once() -> None:
    responses = [{"close_before_response": True}, {"chunks": [{"content": "ok"}]}]
    with FakeOpenAI({"responses": responses}) as fake:
        transport = CountingTransport()
        async with OpenAIClient(v1(fake), transport=transport) as client:
            got = await collect(client)
    assert [c.content for c in got] == ["ok", ""]
    assert transport.attempts == 2
    assert fake.outcomes == ["closed_before_response", "complete"]


async def test_second_connection_failure_is_not_retried_again() -> None:
    with FakeOpenAI({"responses": [{"close_before_response": True}]}) as fake:
        transport = CountingTransport()
        async with OpenAIClient(v1(fake), transport=transport) as client:
            with pytest.raises(ServerUnavailable):
                await collect(client)
    assert transport.attempts == 2


async def test_stall_mid_stream_raises_and_drops_the_connection() -> None:
    with FakeOpenAI(script(stall_after=2)) as fake:
        async with OpenAIClient(v1(fake), stall=StallLimits(0.5, 0.5)) as client:
            seen: list[ChatChunk] = []
            with pytest.raises(StreamStalled, match=r"sent nothing for 0\.5s"):
                async with client.stream_chat(request()) as chunks:
                    async for chunk in chunks:
                        seen.append(chunk)
            assert await outcomes(fake, 1) == ["client_disconnected"]
    assert seen == [ChatChunk(thinking="hmm"), ChatChunk(content="Hel")]


async def test_no_response_head_within_stall_deadline() -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/v1"
        transport = CountingTransport()
        stall = StallLimits(0.3, 0.3)
        async with OpenAIClient(url, transport=transport, stall=stall) as client:
            with pytest.raises(StreamStalled, match=r"started no reply within 0\.3s"):
                await collect(client)
        nursery.cancel_scope.cancel()
    assert transport.attempts == 1


async def test_more_time_before_the_first_token_than_between_tokens() -> None:
    # The same two limits as the Ollama client: prompt processing gets first_token.
    with FakeOpenAI(script(stall_after=0)) as fake:
        async with OpenAIClient(v1(fake), stall=StallLimits(0.6, 0.2)) as client:
            with pytest.raises(StreamStalled, match=r"started no reply within 0\.6s") as info:
                await collect(client)
    assert "ZCODER_FIRST_TOKEN_TIMEOUT" in str(info.value)
    with FakeOpenAI(script(stall_after=1)) as fake:
        async with OpenAIClient(v1(fake), stall=StallLimits(30, 0.2)) as client:
            with pytest.raises(StreamStalled, match=r"sent nothing for 0\.2s") as info:
                await collect(client)
    assert "ZCODER_STALL_TIMEOUT" in str(info.value)


async def test_malformed_event() -> None:
    with FakeOpenAI(script(malformed_after=1)) as fake:
        async with OpenAIClient(v1(fake)) as client:
            with pytest.raises(MalformedStream, match="not JSON: this is not json"):
                await collect(client)


@pytest.mark.parametrize("as_data", [False, True])
async def test_error_event_in_a_200_stream(as_data: bool) -> None:
    with FakeOpenAI(script(error_line_after=3, error="out of memory"), error_as_data=as_data) as f:
        async with OpenAIClient(v1(f)) as client:
            with pytest.raises(StreamErrorLine) as info:
                await collect(client)
    assert str(info.value) == "the model server failed mid-reply: out of memory"


async def test_stream_without_finish_is_incomplete() -> None:
    with FakeOpenAI(script(no_done=True)) as fake:
        async with OpenAIClient(v1(fake)) as client:
            seen: list[str] = []
            with pytest.raises(IncompleteStream):
                async with client.stream_chat(request()) as chunks:
                    async for chunk in chunks:
                        seen.append(chunk.content or chunk.thinking)
    assert seen == ["hmm", "Hel", "lo"]


async def test_finish_without_done_marker_is_complete() -> None:
    body = (
        b'data: {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    )

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    async with OpenAIClient("http://x/v1", transport=httpx.MockTransport(handler)) as client:
        got = await collect(client)
    assert got == [ChatChunk(content="a"), ChatChunk(done=True, done_reason="stop")]


async def test_connection_lost_mid_body_is_incomplete() -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'
            raise httpx.ReadError("connection reset by peer")

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Broken())

    async with OpenAIClient("http://x/v1", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(IncompleteStream, match="connection reset by peer"):
            await collect(client)


async def test_cancel_mid_stream_closes_the_connection() -> None:
    with FakeOpenAI(script(delay=0.05, stall_after=3)) as fake:
        async with OpenAIClient(v1(fake)) as client:
            seen: list[ChatChunk] = []
            with trio.CancelScope() as scope:
                async with client.stream_chat(request()) as chunks:
                    async for chunk in chunks:
                        seen.append(chunk)
                        if len(seen) == 2:
                            scope.cancel()
            assert scope.cancelled_caught
            assert await outcomes(fake, 1) == ["client_disconnected"]
    assert len(seen) == 2


async def test_request_body_shape(fake: FakeOpenAI) -> None:
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    history = [
        Message("system", "be brief"),
        Message("user", "read a.py"),
        Message(
            "assistant",
            "",
            thinking="need the file",
            tool_calls=(ToolCall("read_file", {"path": "a.py"}, id="call_1"), ToolCall("ls")),
        ),
        Message("tool", "print(1)", tool_name="read_file"),
        Message("tool", "a.py", tool_name="ls"),
    ]
    req = ChatRequest(
        MODEL, history, tools=[tool], think=False, num_ctx=8192, num_predict=512, temperature=0
    )
    async with OpenAIClient(v1(fake), api_key="sk-test") as client:
        await collect(client, req)
    calls = [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
        {"id": "call_2_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ]  # fmt: skip
    assert fake.requests == [
        {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "read a.py"},
                {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
                {"role": "tool", "tool_call_id": "call_2_1", "content": "a.py"},
            ],
            "tools": [tool],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 512,
            "temperature": 0,
        }
    ]
    assert fake.authorizations == ["Bearer sk-test"]


async def test_no_key_sends_no_authorization(fake: FakeOpenAI) -> None:
    async with OpenAIClient(v1(fake)) as client:
        await collect(client)
    assert fake.authorizations == [None]
    assert "max_tokens" not in fake.requests[0] and "temperature" not in fake.requests[0]


async def test_list_models_identify_and_context_length() -> None:
    models = ["qwen3-coder:latest", "llama3.2:3b"]
    with FakeOpenAI({"models": models, "context_length": 8192}) as fake:
        async with OpenAIClient(v1(fake)) as client:
            listed = await client.list_models()
            assert await client.context_length(MODEL) is None  # a kind that does not say
            kind, served = await client.identify()
            assert kind is LLAMA_CPP and served == listed
            assert client.kind is GENERIC  # a report: connect.choose_server decides
        async with OpenAIClient(v1(fake), kind=kind) as client:
            assert await client.context_length(MODEL) == 8192  # from /v1/models meta.n_ctx
    assert listed == [ModelInfo(m) for m in models]
    with FakeOpenAI({"context_length": 4096}, model_meta=False) as fake:
        async with OpenAIClient(v1(fake), kind=LLAMA_CPP) as client:
            assert await client.context_length(MODEL) == 4096  # from /props
    with FakeOpenAI({"context_length": 32768}, owned_by="vllm") as fake:
        async with OpenAIClient(v1(fake)) as client:
            assert (await client.identify())[0] is VLLM
        async with OpenAIClient(v1(fake), kind=VLLM) as client:
            assert await client.context_length(MODEL) == 32768
            assert await client.context_length("other") is None


async def test_context_length_raises_only_for_transport_failures() -> None:
    async with OpenAIClient(f"http://127.0.0.1:{closed_port()}/v1", kind=LLAMA_CPP) as client:
        with pytest.raises(ServerUnavailable):
            await client.context_length(MODEL)


async def test_sequential_turns_reuse_the_connection() -> None:
    responses = [{"chunks": [{"content": "one"}]}, {"chunks": [{"content": "two"}]}]
    with FakeOpenAI({"responses": responses, "repeat_last": False}) as fake:
        async with OpenAIClient(v1(fake)) as client:
            texts = ["".join(c.content for c in await collect(client)) for _ in range(3)]
    assert texts == ["one", "two", "(script exhausted)"]
    assert fake.connection_count == 1


async def test_ollama_client_at_an_openai_server_says_to_use_the_openai_api() -> None:
    from zcoder.agent.ollama import OllamaClient

    with FakeOpenAI() as fake:
        url = fake.url
        async with OllamaClient(url) as client:
            with pytest.raises(ModelHTTPError) as info:
                await collect(client)
    assert info.value.speaks_openai and not info.value.model_missing
    line = describe_model_error(info.value, client.kind, url, MODEL)
    assert line == (
        f"{url} is not an Ollama server: it speaks the OpenAI-compatible API; "
        "use --api openai or a host ending in /v1"
    )
    assert "{" not in info.value.server_message  # the message text, not the JSON object


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}',
        b'{"error": "File Not Found"}',
        b'{"object": "error", "message": "File Not Found", "code": 404}',
        b"File Not Found",
    ],
)
def test_error_bodies_show_as_their_message_text(body: bytes) -> None:
    from zcoder.agent.json_fields import error_text

    assert error_text(body) == "File Not Found"
