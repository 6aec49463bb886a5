"""The fakes' context window: their own token count, each server's exact refusal, and the
fake Ollama's silent truncation, over real HTTP."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.window import Tokenizer, overflow_body

MODEL = "qwen3-coder:latest"
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def chat_body(chars: int, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "x" * chars}], **extra}


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url, json=body, timeout=10)


def test_the_tokenizer_counts_contents_calls_and_schemas_not_as_zcoder_does() -> None:
    tokenizer = Tokenizer()
    assert tokenizer.count([{"role": "user", "content": "x" * 33}]) == 10 + 3
    assert tokenizer.count([{"role": "user", "content": "x" * 34}]) == 11 + 3
    # Ollama sends the arguments as an object, the OpenAI API as JSON text: the same count.
    call = {"function": {"name": "read_file", "arguments": {"path": "a.py"}}}
    with_call = {"role": "assistant", "content": "", "tool_calls": [call]}
    assert tokenizer.count([with_call]) == math.ceil((9 + 16) / 3.3) + 3 == 11
    as_text = {"function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    assert tokenizer.count([{**with_call, "tool_calls": [as_text]}]) == 11
    assert tokenizer.count([], TOOLS) == math.ceil(len(json.dumps(TOOLS)) / 3.3)
    assert Tokenizer(2.0, 0).count([{"role": "user", "content": "abcd"}]) == 2


LLAMA_CPP = (
    b'{"error":{"code":400,"message":"request (3034 tokens) exceeds the available context '
    b'size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
    b'"n_prompt_tokens":3034,"n_ctx":2048}}'
)
VLLM = (
    b'{"object":"error","message":"This model\'s maximum context length is 2048 tokens. '
    b"However, you requested 3546 tokens (3034 in the messages, 512 in the completion). "
    b'Please reduce the length of the messages or completion.","type":"BadRequestError",'
    b'"param":null,"code":400}'
)
LM_STUDIO = (
    b'{"error":"Trying to keep the first 3034 tokens when context the overflows. However, the '
    b"model is loaded with context length of only 2048 tokens, which is not enough. Try to "
    b'load the model with a larger context length, or provide a shorter input"}'
)
OLLAMA = (
    b'{"error":{"message":"the input length exceeds the context length",'
    b'"type":"invalid_request_error","param":null,"code":null}}'
)


@pytest.mark.parametrize(
    ("owned_by", "body"),
    [
        ("llamacpp", LLAMA_CPP),
        ("vllm", VLLM),
        ("organization_owner", LM_STUDIO),
        ("library", OLLAMA),
    ],
)
def test_a_prompt_over_the_window_gets_the_servers_exact_body(owned_by: str, body: bytes) -> None:
    with FakeOpenAI(
        {"responses": [{"chunks": [{"content": "ok"}]}]}, owned_by=owned_by, window=2048
    ) as fake:
        # 10,000 characters: 3,031 tokens, and 3 for the message.
        refused = post(f"{fake.url}/v1/chat/completions", chat_body(10_000, max_tokens=512))
        fits = post(
            f"{fake.url}/v1/chat/completions",
            chat_body(3_000, max_tokens=512, stream_options={"include_usage": True}),
        )
    assert (refused.status_code, refused.content) == (400, body)
    assert refused.headers["content-type"].startswith("application/json")
    assert fits.status_code == 200
    usage = [json.loads(e[6:]) for e in fits.text.split("\n\n") if '"usage"' in e]
    assert usage[0]["usage"]["prompt_tokens"] == 910 + 3
    assert fake.counted == [3034, 913]
    assert fake.outcomes == ["context_exceeded", "complete"]


def test_each_server_refuses_at_its_own_edge() -> None:
    window = 1000
    # llama.cpp refuses a prompt that fills the window; vLLM counts the completion too.
    assert overflow_body("llama.cpp", 999, 4096, window) == b""
    assert overflow_body("llama.cpp", 1000, None, window) != b""
    assert overflow_body("vLLM", 900, 100, window) == b""
    assert overflow_body("vLLM", 900, 101, window) != b""
    assert overflow_body("vLLM", 1001, None, window) != b""
    for flavour in ("LM Studio", "Ollama"):
        assert overflow_body(flavour, 1000, 4096, window) == b""
        assert overflow_body(flavour, 1001, None, window) != b""


def test_without_a_window_nothing_is_refused_and_the_old_count_stays() -> None:
    with FakeOpenAI({"responses": [{"chunks": [{"content": "ok"}]}]}) as fake:
        response = post(
            f"{fake.url}/v1/chat/completions",
            chat_body(100_000, stream_options={"include_usage": True}),
        )
    assert response.status_code == 200 and '"prompt_tokens": 25001' in response.text
    assert fake.counted == []


@pytest.mark.parametrize("report", [True, False])
def test_the_window_is_what_each_server_reports(report: bool) -> None:
    def get(fake: FakeOpenAI, path: str) -> Any:
        response = httpx.get(fake.url + path, timeout=10)
        return response.json() if response.status_code == 200 else response.status_code

    window = 4096 if report else None
    with FakeOpenAI(window=4096, report_window=report) as fake:
        (entry,) = get(fake, "/v1/models")["data"]
        props = get(fake, "/props")
    assert entry.get("meta", {}).get("n_ctx") == window
    assert props == (
        {"default_generation_settings": {"n_ctx": 4096}, "n_ctx": 4096} if report else 404
    )
    with FakeOpenAI(owned_by="vllm", window=4096, report_window=report) as fake:
        (entry,) = get(fake, "/v1/models")["data"]
    assert entry.get("max_model_len") == window
    with FakeOpenAI(owned_by="organization_owner", window=4096, report_window=report) as fake:
        (listed,) = get(fake, "/api/v0/models")["data"]
        one = get(fake, f"/api/v0/models/{MODEL}")
        missing = get(fake, "/api/v0/models/other")
    assert listed == one and one.get("loaded_context_length") == window and missing == 404
    with FakeOpenAI(owned_by="library", window=4096) as fake:
        before = get(fake, "/api/ps")
        post(f"{fake.url}/v1/chat/completions", chat_body(10))
        after = get(fake, "/api/ps")
    assert before == {"models": []}  # as Ollama: only a loaded model is listed
    assert [(m["model"], m["context_length"]) for m in after["models"]] == [(MODEL, 4096)]


def ollama_chat(fake: FakeOllama, chars: int, **options: Any) -> dict[str, Any]:
    body = chat_body(chars, stream=False)
    if options:
        body["options"] = options
    response = post(f"{fake.url}/api/chat", body)
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


def test_ollama_keeps_the_last_num_ctx_tokens_silently() -> None:
    script = {"responses": [{"chunks": [{"content": "ok"}]}]}
    with FakeOllama(script, tokenizer=Tokenizer()) as fake:
        small = ollama_chat(fake, 3_300, num_ctx=4096)
        cut = ollama_chat(fake, 33_000, num_ctx=4096)
        default = ollama_chat(fake, 33_000)  # Ollama's own default: 2048
        warm = post(
            f"{fake.url}/api/chat", chat_body(33_000, options={"num_predict": 1, "num_ctx": 16384})
        )
    assert warm.status_code == 200
    assert [small["prompt_eval_count"], cut["prompt_eval_count"], default["prompt_eval_count"]] == [
        1003,
        4096,
        2048,
    ]
    assert cut["message"]["content"] == "ok"  # never an error
    assert fake.counted == [1003, 10003, 10003, 10003]
    assert fake.truncated == [False, True, True, False]


def test_a_responder_picks_each_reply_from_the_request() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return {"chunks": [{"content": f"{len(body['messages'])} messages"}]}

    with FakeOllama(responder=responder) as fake:
        got = ollama_chat(fake, 10)
    assert got["message"]["content"] == "1 messages"
