"""The fake OpenAI-compatible server checked against the official ``openai`` package's types
and client, so that it cannot drift from what such a server sends."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
from openai.types import Model
from openai.types.chat import ChatCompletionChunk

from tests.fakes.openai_server import FakeOpenAI

MODEL = "qwen3-coder:latest"
USER = [{"role": "user", "content": "hi"}]
CALL = {"name": "read_file", "arguments": {"path": "a.py"}}
RICH = [
    {"thinking": "hmm"},
    {"content": "Hel"},
    {"content": "lo"},
    {"tool_calls": [CALL, {"name": "ls", "arguments": {}}]},
]


def events(fake: FakeOpenAI, body: dict[str, Any]) -> list[str]:
    response = httpx.post(f"{fake.url}/v1/chat/completions", json=body, timeout=10, verify=False)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    blocks = response.text.split("\n\n")
    assert blocks[-1] == ""
    assert all(b.startswith("data: ") for b in blocks[:-1])
    return [b.removeprefix("data: ") for b in blocks[:-1]]


def test_every_event_is_a_chat_completion_chunk() -> None:
    body = {"model": MODEL, "messages": USER, "stream": True}
    with FakeOpenAI({"responses": [{"chunks": RICH}]}) as fake:
        got = events(fake, {**body, "stream_options": {"include_usage": True}})
        plain = events(fake, body)
    assert got[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(e)) for e in got[:-1]]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len(RICH)
    assert len(plain) == len(got) - 1  # no usage event unless asked for


def test_the_official_client_reads_the_stream() -> None:
    tools: Any = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    with FakeOpenAI({"responses": [{"chunks": RICH}]}) as fake:
        with openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test") as client:
            listed = client.models.list()
            stream = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "hi"}],
                tools=tools,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = list(stream)
        auth = fake.authorizations
    assert [Model.model_validate(m.model_dump()).id for m in listed.data] == [MODEL]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello"
    pieces: dict[int, str] = {}
    for c in chunks:
        for call in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            pieces[call.index] = pieces.get(call.index, "") + (call.function.arguments or "")  # type: ignore[union-attr]
    assert [json.loads(p) for p in pieces.values()] == [{"path": "a.py"}, {}]
    assert auth == ["Bearer sk-test", "Bearer sk-test"]


def test_error_bodies_and_unknown_paths() -> None:
    with FakeOpenAI({"responses": [{"status": 500, "error": "boom"}]}, check_model=True) as fake:
        missing = httpx.post(
            f"{fake.url}/v1/chat/completions", json={"model": "nope", "messages": USER}
        )
        failed = httpx.post(
            f"{fake.url}/v1/chat/completions", json={"model": MODEL, "messages": USER}
        )
        unknown = httpx.get(f"{fake.url}/api/tags")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "The model `nope` does not exist."
    assert (failed.status_code, failed.json()["error"]["message"]) == (500, "boom")
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "File Not Found"
    # The official client makes the same of them.
    with FakeOpenAI({"responses": [{"status": 500, "error": "boom"}]}) as fake:
        client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="x", max_retries=0)
        try:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
        except openai.InternalServerError as exc:
            assert exc.message.endswith("boom")
        else:
            raise AssertionError("no error")
        finally:
            client.close()
