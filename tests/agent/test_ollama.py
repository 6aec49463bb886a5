"""OllamaClient against the fake Ollama (a real HTTP server): every success and failure mode."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import httpx
import pytest
import trio

from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.model import ChatChunk, ChatRequest, ModelClient, ModelInfo, StallLimits
from zcoder.agent.ollama import OllamaClient, ShowInfo
from zcoder.conversation import Message, ToolCall
from zcoder.errors import (
    IncompleteStream,
    MalformedStream,
    ModelHTTPError,
    ServerUnavailable,
    StreamErrorLine,
    StreamStalled,
)

MODEL = "qwen3-coder:latest"
HELLO = [{"thinking": "hmm"}, {"content": "Hel"}, {"content": "lo"}]


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts the HTTP attempts the client makes."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.attempts = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama({"responses": [{"chunks": HELLO}]}) as server:
        yield server


def request(model: str = MODEL, **kwargs: Any) -> ChatRequest:
    return ChatRequest(model=model, messages=[Message("user", "hi")], **kwargs)


async def collect(client: OllamaClient, req: ChatRequest | None = None) -> list[ChatChunk]:
    async with client.stream_chat(req or request()) as chunks:
        return [chunk async for chunk in chunks]


async def outcomes(fake: FakeOllama, count: int) -> list[str]:
    return await trio.to_thread.run_sync(fake.wait_for_outcomes, count)


def without_ids(chunks: list[ChatChunk]) -> list[ChatChunk]:
    return [
        ChatChunk(
            content=c.content,
            thinking=c.thinking,
            tool_calls=tuple(ToolCall(t.name, t.arguments) for t in c.tool_calls),
            done=c.done,
            done_reason=c.done_reason,
            prompt_eval_count=c.prompt_eval_count,
            eval_count=c.eval_count,
            eval_duration_ns=c.eval_duration_ns,
        )
        for c in chunks
    ]


def script(**response: Any) -> dict[str, Any]:
    return {"responses": [{"chunks": HELLO, **response}]}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_is_a_model_client() -> None:
    client: ModelClient = OllamaClient("http://127.0.0.1:1")
    assert isinstance(client, OllamaClient)


def test_rejects_non_positive_deadlines() -> None:
    with pytest.raises(ValueError, match="stall limits must be positive"):
        OllamaClient("http://127.0.0.1:1", stall=StallLimits(0, 0))
    with pytest.raises(ValueError, match="connect_seconds"):
        OllamaClient("http://127.0.0.1:1", connect_seconds=0)


async def test_streams_thinking_content_and_tool_calls() -> None:
    call = {"name": "read_file", "arguments": {"path": "a.py"}}
    chunks = [*HELLO, {"tool_calls": [call]}]
    body = {"chunks": chunks, "prompt_eval_count": 42, "eval_count": 7}
    with FakeOllama({"responses": [body]}) as fake:
        async with OllamaClient(fake.url) as client:
            got = await collect(client)
    assert without_ids(got) == [
        ChatChunk(thinking="hmm"),
        ChatChunk(content="Hel"),
        ChatChunk(content="lo"),
        ChatChunk(tool_calls=(ToolCall("read_file", {"path": "a.py"}),)),
        ChatChunk(
            done=True,
            done_reason="stop",
            prompt_eval_count=42,
            eval_count=7,
            eval_duration_ns=140_000_000,
        ),
    ]
    assert got[3].tool_calls[0].id.startswith("call_")


async def test_tool_call_arguments_as_json_string_are_decoded() -> None:
    calls = [
        {"name": "read_file", "arguments": '{"path": "b.py"}'},
        {"name": "list_dir", "arguments": ""},
    ]
    with FakeOllama({"responses": [{"chunks": [{"tool_calls": calls}]}]}) as fake:
        async with OllamaClient(fake.url) as client:
            got = await collect(client)
    assert [(t.name, dict(t.arguments)) for t in got[0].tool_calls] == [
        ("read_file", {"path": "b.py"}),
        ("list_dir", {}),
    ]


@pytest.mark.parametrize("arguments", ["[1, 2]", "not json", '"text"'])
async def test_tool_call_arguments_not_an_object_reach_the_loop_as_a_problem(
    arguments: str,
) -> None:
    # The model's mistake, not the server's: the loop answers the call with an error.
    calls = [{"name": "read_file", "arguments": arguments}]
    with FakeOllama({"responses": [{"chunks": [{"tool_calls": calls}]}]}) as fake:
        async with OllamaClient(fake.url) as client:
            got = await collect(client)
    [call] = [c for chunk in got for c in chunk.tool_calls]
    assert (call.name, dict(call.arguments)) == ("read_file", {})
    assert call.problem.startswith("the arguments are not ")


async def test_done_reason_length_is_passed_on() -> None:
    with FakeOllama(script(done_reason="length")) as fake:
        async with OllamaClient(fake.url) as client:
            got = await collect(client)
    assert got[-1].done and got[-1].done_reason == "length"


async def test_unknown_model_is_404_with_pull_hint() -> None:
    with FakeOllama({"models": [MODEL], "responses": [{"chunks": HELLO}]}) as fake:
        async with OllamaClient(fake.url) as client:
            with pytest.raises(ModelHTTPError) as info:
                await collect(client, request("llama9:7b"))
    assert info.value.status == 404
    assert info.value.server_message == (
        "model 'llama9:7b' not found; run `ollama pull llama9:7b` to download it"
    )
    assert str(info.value).startswith("HTTP 404: model 'llama9:7b' not found")
    assert fake.outcomes == ["model_not_found"]


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, '"qwen3-coder:latest" does not support thinking'), (500, "llama runner crashed")],
)
async def test_http_error_carries_server_text_and_is_not_retried(status: int, error: str) -> None:
    with FakeOllama(script(status=status, error=error)) as fake:
        transport = CountingTransport()
        async with OllamaClient(fake.url, transport=transport) as client:
            with pytest.raises(ModelHTTPError) as info:
                await collect(client)
    assert (info.value.status, info.value.server_message) == (status, error)
    assert transport.attempts == 1
    assert len(fake.requests) == 1


async def test_404_from_something_else_than_ollama() -> None:
    with FakeOllama() as fake:
        url = fake.url + "/nothing"
        async with OllamaClient(url) as client:
            with pytest.raises(ModelHTTPError) as info:
                await client.list_models()
    assert info.value.status == 404
    assert info.value.server_message == (f"404 page not found; is {url} an Ollama server?")


async def test_server_down_is_unavailable_after_exactly_one_retry() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    transport = CountingTransport()
    async with OllamaClient(url, transport=transport) as client:
        with pytest.raises(ServerUnavailable) as info:
            await collect(client)
    assert transport.attempts == 2
    message = str(info.value)
    # The cause is the OS error, short, not httpx's text that repeats the address.
    assert (
        message == f"cannot reach Ollama at {url} (connection refused); is `ollama serve` running?"
    )
    assert info.value.reason == "connection refused"


async def test_list_models_with_server_down_is_unavailable() -> None:
    transport = CountingTransport()
    async with OllamaClient(f"http://127.0.0.1:{closed_port()}", transport=transport) as client:
        with pytest.raises(ServerUnavailable):
            await client.list_models()
    assert transport.attempts == 2


async def test_connection_closed_before_response_is_retried_once() -> None:
    responses = [{"close_before_response": True}, {"chunks": [{"content": "ok"}]}]
    with FakeOllama({"responses": responses}) as fake:
        transport = CountingTransport()
        async with OllamaClient(fake.url, transport=transport) as client:
            got = await collect(client)
    assert [c.content for c in got] == ["ok", ""]
    assert transport.attempts == 2
    assert fake.outcomes == ["closed_before_response", "complete"]
    assert fake.requests[0] == fake.requests[1]


async def test_second_connection_failure_is_not_retried_again() -> None:
    with FakeOllama({"responses": [{"close_before_response": True}]}) as fake:
        transport = CountingTransport()
        async with OllamaClient(fake.url, transport=transport) as client:
            with pytest.raises(ServerUnavailable, match="is `ollama serve` running"):
                await collect(client)
    assert transport.attempts == 2
    assert fake.outcomes == ["closed_before_response"] * 2


async def test_stall_mid_stream_raises_and_drops_the_connection() -> None:
    with FakeOllama(script(stall_after=2)) as fake:
        async with OllamaClient(fake.url, stall=StallLimits(0.5, 0.5)) as client:
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
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        transport = CountingTransport()
        async with OllamaClient(url, transport=transport, stall=StallLimits(0.3, 0.3)) as client:
            with pytest.raises(StreamStalled, match=r"started no reply within 0\.3s"):
                await collect(client)
        nursery.cancel_scope.cancel()
    assert transport.attempts == 1


async def test_more_time_before_the_first_token_than_between_tokens() -> None:
    # Silence before any chunk is bounded by first_token: the shorter between-token limit
    # does not apply while the server reads the prompt.
    with FakeOllama(script(stall_after=0)) as fake:
        async with OllamaClient(fake.url, stall=StallLimits(0.6, 0.2)) as client:
            with pytest.raises(StreamStalled, match=r"started no reply within 0\.6s") as info:
                await collect(client)
    assert "ZCODER_FIRST_TOKEN_TIMEOUT" in str(info.value)
    # Once tokens flow, between_tokens bounds each silence, however long first_token is.
    with FakeOllama(script(stall_after=1)) as fake:
        async with OllamaClient(fake.url, stall=StallLimits(30, 0.2)) as client:
            with pytest.raises(StreamStalled, match=r"sent nothing for 0\.2s") as info:
                await collect(client)
    assert "ZCODER_STALL_TIMEOUT" in str(info.value)


async def test_context_length_from_api_show() -> None:
    with FakeOllama({"context_length": 8192, "models": [MODEL]}) as fake:
        async with OllamaClient(fake.url) as client:
            assert client.kind.name == "Ollama"
            assert await client.context_length(MODEL) == 8192
            # An unknown model is "not reported", not a failure (the chat says what is wrong).
            assert await client.context_length("nosuch:latest") is None


async def test_context_length_of_an_unreachable_server_raises() -> None:
    async with OllamaClient(f"http://127.0.0.1:{closed_port()}") as client:
        with pytest.raises(ServerUnavailable):
            await client.context_length(MODEL)


async def test_malformed_line() -> None:
    with FakeOllama(script(malformed_after=1)) as fake:
        async with OllamaClient(fake.url) as client:
            with pytest.raises(MalformedStream, match="not JSON: this is not json"):
                await collect(client)


async def test_error_line_in_a_200_stream() -> None:
    with FakeOllama(script(error_line_after=3, error="out of memory")) as fake:
        async with OllamaClient(fake.url) as client:
            with pytest.raises(StreamErrorLine) as info:
                await collect(client)
    assert str(info.value) == "the model server failed mid-reply: out of memory"


async def test_stream_without_done_is_incomplete() -> None:
    with FakeOllama(script(no_done=True)) as fake:
        async with OllamaClient(fake.url) as client:
            seen: list[str] = []
            with pytest.raises(IncompleteStream):
                async with client.stream_chat(request()) as chunks:
                    async for chunk in chunks:
                        seen.append(chunk.content or chunk.thinking)
    assert seen == ["hmm", "Hel", "lo"]


async def test_connection_lost_mid_body_is_incomplete() -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'{"message": {"role": "assistant", "content": "a"}, "done": false}\n'
            raise httpx.ReadError("connection reset by peer")

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Broken())

    async with OllamaClient("http://x", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(IncompleteStream, match="connection reset by peer"):
            await collect(client)


async def test_cancel_mid_stream_closes_the_connection() -> None:
    with FakeOllama(script(delay=0.05, stall_after=3)) as fake:
        async with OllamaClient(fake.url) as client:
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


async def test_leaving_early_closes_the_connection() -> None:
    with FakeOllama(script(delay=0.2)) as fake:
        async with OllamaClient(fake.url) as client:
            async with client.stream_chat(request()) as chunks:
                async for _chunk in chunks:
                    break
            assert await outcomes(fake, 1) == ["client_disconnected"]


async def test_request_body_shape(fake: FakeOllama) -> None:
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    history = [
        Message("system", "be brief"),
        Message("user", "read a.py"),
        Message(
            "assistant",
            "",
            thinking="need the file",
            tool_calls=(ToolCall("read_file", {"path": "a.py"}, id="call_1"),),
        ),
        Message("tool", "print(1)", tool_name="read_file"),
    ]
    req = ChatRequest(MODEL, history, tools=[tool], think=False, num_ctx=8192, num_predict=512)
    async with OllamaClient(fake.url) as client:
        await collect(client, req)
    call = {"function": {"name": "read_file", "arguments": {"path": "a.py"}}}
    assert fake.requests == [
        {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "read a.py"},
                {
                    "role": "assistant",
                    "content": "",
                    "thinking": "need the file",
                    "tool_calls": [call],
                },
                {"role": "tool", "content": "print(1)", "tool_name": "read_file"},
            ],
            "tools": [tool],
            "stream": True,
            "think": False,
            "options": {"num_ctx": 8192, "num_predict": 512},
        }
    ]


async def test_options_left_out_when_unset(fake: FakeOllama) -> None:
    async with OllamaClient(fake.url) as client:
        await collect(client)
    body: Mapping[str, Any] = fake.requests[0]
    assert "options" not in body
    assert (body["stream"], body["think"], body["tools"]) == (True, True, [])


async def test_warm_up_load_answer() -> None:
    with FakeOllama() as fake:
        async with OllamaClient(fake.url) as client:
            got = await collect(client, ChatRequest(MODEL, []))
    assert got == [ChatChunk(done=True, done_reason="load")]
    assert fake.outcomes == ["load"]


async def test_list_models_version_and_show() -> None:
    models = ["qwen3-coder:latest", "llama3.2:3b"]
    with FakeOllama({"models": models, "context_length": 40960}) as fake:
        async with OllamaClient(fake.url) as client:
            listed = await client.list_models()
            version = await client.version()
            shown = await client.show("qwen3-coder")
            with pytest.raises(ModelHTTPError, match="ollama pull nope"):
                await client.show("nope")
    assert listed == [ModelInfo(m, 18_556_688_736, "30.5B", "Q4_K_M") for m in models]
    assert version == "0.12.6"
    assert shown == ShowInfo(
        "qwen3-coder", 40960, frozenset({"completion", "tools", "thinking"}), "qwen3", "30.5B"
    )


async def test_sequential_turns_reuse_the_client() -> None:
    responses = [{"chunks": [{"content": "one"}]}, {"chunks": [{"content": "two"}]}]
    with FakeOllama({"responses": responses, "repeat_last": False}) as fake:
        async with OllamaClient(fake.url) as client:
            texts = ["".join(c.content for c in await collect(client)) for _ in range(3)]
    assert texts == ["one", "two", "(script exhausted)"]
    assert fake.connection_count == 1  # a complete reply leaves the connection reusable
