"""The fake Ollama checked against the official ``ollama`` client, so it cannot drift."""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from ollama._types import ChatResponse, ListResponse, ProcessResponse, ShowResponse

from tests.fakes.ollama_server import FakeOllama, ScriptError

ROOT = Path(__file__).resolve().parents[2]
MODEL = "qwen3-coder:latest"
USER = [{"role": "user", "content": "hi"}]
CHUNK_KEYS = {"model", "created_at", "message", "done"}
DONE_KEYS = CHUNK_KEYS | {
    "done_reason",
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
}
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
CALL = {"name": "read_file", "arguments": {"path": "a.py"}}
RICH = [
    {"thinking": "hmm"},
    {"content": "Hel"},
    {"thinking": "and", "content": "lo"},
    {"tool_calls": [CALL, {"name": "ls", "arguments": {}}]},
]

ONE_CALL = {"responses": [{"chunks": [*RICH[:3], {"tool_calls": [CALL]}]}]}


# verify=False in these helpers: plain http only, and it spares loading the CA bundle.
def get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=10, verify=False)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, timeout=10, verify=False, **kwargs)


def official(url: str) -> ollama.Client:
    return ollama.Client(host=url, verify=False)


def chat(fake: FakeOllama, body: dict[str, Any]) -> httpx.Response:
    """One chat, returned once the fake has recorded its outcome.

    Each call is a new connection, so a handler thread that records after its last byte
    could otherwise record after the next request's: the outcomes would be out of order.
    """
    before = len(fake.outcomes)
    response = post(f"{fake.url}/api/chat", json=body)
    fake.wait_for_outcomes(before + 1)
    return response


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(x) for x in response.text.splitlines()]


def test_every_chat_line_is_shaped_like_ollamas() -> None:
    with FakeOllama({"responses": [{"chunks": RICH}]}) as fake:
        response = chat(fake, {"model": MODEL, "messages": USER})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["transfer-encoding"] == "chunked"
    objs = lines(response)
    for obj in objs:
        ChatResponse.model_validate(obj)
        assert RFC3339_UTC.match(obj["created_at"])
        assert obj["model"] == MODEL
        assert obj["message"]["role"] == "assistant"
    assert [set(o) for o in objs] == [CHUNK_KEYS] * 4 + [DONE_KEYS]
    assert [o["message"].get("thinking") for o in objs[:4]] == ["hmm", None, "and", None]
    assert [o["message"]["content"] for o in objs] == ["", "Hel", "lo", "", ""]
    calls = objs[3]["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"index": 0, "name": "read_file", "arguments": {"path": "a.py"}},
        {"index": 1, "name": "ls", "arguments": {}},
    ]
    assert all(re.fullmatch(r"call_[a-z0-9]{8}", c["id"]) for c in calls)
    done = objs[-1]
    assert (done["done"], done["done_reason"], done["eval_count"]) == (True, "stop", 4)
    assert done["message"] == {"role": "assistant", "content": ""}


def test_string_arguments_are_sent_as_given() -> None:
    # Not Ollama's shape on purpose: it plays a model or proxy that sends JSON text.
    calls = [{"name": "ls", "arguments": '{"path": "."}'}]
    with FakeOllama({"responses": [{"chunks": [{"tool_calls": calls}]}]}) as fake:
        first = lines(chat(fake, {"model": MODEL, "messages": USER}))[0]
    assert first["message"]["tool_calls"][0]["function"]["arguments"] == '{"path": "."}'


def test_official_client_streams_from_the_fake() -> None:
    with FakeOllama(ONE_CALL) as fake, official(fake.url) as client:
        parts = list(client.chat(MODEL, USER, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Hello"
    assert "".join(p.message.thinking or "" for p in parts) == "hmmand"
    calls = [c for p in parts for c in p.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("read_file", {"path": "a.py"})
    ]
    assert parts[-1].done and parts[-1].done_reason == "stop"


def test_official_client_without_streaming_gets_one_aggregate() -> None:
    with FakeOllama(ONE_CALL) as fake, official(fake.url) as client:
        reply = client.chat(MODEL, USER, stream=False)
    assert (reply.message.content, reply.message.thinking) == ("Hello", "hmmand")
    assert [c.function.name for c in reply.message.tool_calls or []] == ["read_file"]
    assert reply.done and reply.eval_count == 4


def test_official_client_sees_errors() -> None:
    script = {"responses": [{"chunks": RICH, "error_line_after": 1, "error": "out of memory"}]}
    with FakeOllama(script) as fake, official(fake.url) as client:
        with pytest.raises(ollama.ResponseError, match="out of memory"):
            list(client.chat(MODEL, USER, stream=True))
        with pytest.raises(ollama.ResponseError) as info:
            list(client.chat("missing:7b", USER, stream=True))
    assert info.value.status_code == 404
    assert info.value.error == "model 'missing:7b' not found"


def test_failure_modes_on_the_wire() -> None:
    responses = [
        {"chunks": RICH, "malformed_after": 1},
        {"chunks": RICH, "error_line_after": 2, "error": "boom"},
        {"chunks": RICH, "no_done": True},
        {"status": 500, "error": "runner crashed"},
    ]
    with FakeOllama({"responses": responses}) as fake:
        body = {"model": MODEL, "messages": USER}
        malformed, error_line, no_done, status = (chat(fake, body) for _ in range(4))
    assert malformed.text.splitlines()[1] == "this is not json {"
    assert lines(error_line)[2] == {"error": "boom"}
    assert [o["done"] for o in lines(no_done)] == [False] * 4
    assert (status.status_code, status.json()) == (500, {"error": "runner crashed"})
    assert fake.outcomes == ["malformed", "error_line", "no_done", "http_error"]


def test_request_errors_like_ollama() -> None:
    with FakeOllama() as fake:
        missing = chat(fake, {"messages": USER})
        unknown = chat(fake, {"model": "llama9", "messages": USER})
        broken = post(f"{fake.url}/api/chat", content=b"{nope")
    assert (missing.status_code, missing.json()) == (400, {"error": "model is required"})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "model 'llama9' not found"})
    assert broken.status_code == 400
    assert fake.outcomes == ["bad_request", "model_not_found", "bad_request"]


def test_empty_messages_load_the_model_without_using_the_script() -> None:
    with FakeOllama({"responses": [{"chunks": [{"content": "first"}]}]}) as fake:
        load = chat(fake, {"model": "qwen3-coder", "messages": []})
        first = chat(fake, {"model": MODEL, "messages": USER})
    obj = ChatResponse.model_validate(load.json())
    assert (obj.done, obj.done_reason, obj.message.content) == (True, "load", "")
    assert lines(first)[0]["message"]["content"] == "first"
    assert fake.outcomes == ["load", "complete"]


def test_a_one_token_chat_is_a_warmup_without_using_the_script() -> None:
    with FakeOllama({"responses": [{"chunks": [{"content": "first"}]}]}) as fake:
        body = {"model": MODEL, "messages": USER, "options": {"num_predict": 1}}
        warm = chat(fake, body)
        first = chat(fake, {"model": MODEL, "messages": USER})
    *parts, done = [ChatResponse.model_validate(x) for x in lines(warm)]
    assert [p.message.content for p in parts] == ["Hello"]
    assert (done.done, done.done_reason, done.eval_count) == (True, "length", 1)
    assert lines(first)[0]["message"]["content"] == "first"
    assert fake.outcomes == ["warmup", "complete"]
    assert fake.requests[0]["options"] == {"num_predict": 1}


def test_other_endpoints_parse_with_official_types() -> None:
    with FakeOllama({"models": [MODEL, "llama3.2:3b"], "context_length": 8192}) as fake:
        url = fake.url
        tags = ListResponse.model_validate(get(f"{url}/api/tags").json())
        show = ShowResponse.model_validate(
            post(f"{url}/api/show", json={"model": "llama3.2:3b"}).json()
        )
        unknown = post(f"{url}/api/show", json={"model": "x"})
        chat(fake, {"model": "llama3.2:3b", "messages": []})
        ps = ProcessResponse.model_validate(get(f"{url}/api/ps").json())
        version = get(f"{url}/api/version").json()
        root = get(url)
        nothing = get(f"{url}/api/nothing")
        with official(url) as client:
            assert client.list().models[1].model == "llama3.2:3b"
    assert [m.model for m in tags.models] == [MODEL, "llama3.2:3b"]
    assert show.modelinfo is not None and show.modelinfo["qwen3.context_length"] == 8192
    assert show.capabilities == ["completion", "tools", "thinking"]
    assert (unknown.status_code, unknown.json()) == (404, {"error": "model 'x' not found"})
    assert [(m.model, m.context_length) for m in ps.models] == [("llama3.2:3b", 8192)]
    assert version == {"version": "0.12.6"}
    assert (root.status_code, root.text) == (200, "Ollama is running")
    assert (nothing.status_code, nothing.text) == (404, "404 page not found")


def test_control_endpoints() -> None:
    with FakeOllama({"responses": [{"chunks": [{"content": "a"}]}]}) as fake:
        chat(fake, {"model": MODEL, "messages": USER})
        recorded = get(f"{fake.url}/_fake/requests").json()
        bad = post(f"{fake.url}/_fake/script", json={"responses": [{"chunk": []}]})
        still = lines(chat(fake, {"model": MODEL, "messages": USER}))[0]["message"]["content"]
        new = {"responses": [{"chunks": [{"content": "b"}]}], "repeat_last": False}
        good = post(f"{fake.url}/_fake/script", json=new)
        replaced = [
            lines(chat(fake, {"model": MODEL, "messages": USER}))[0]["message"]["content"]
            for _ in range(2)
        ]
        outcomes = get(f"{fake.url}/_fake/outcomes").json()
    assert recorded == [{"model": MODEL, "messages": USER}]
    assert bad.status_code == 400
    assert bad.json() == {"error": "script.responses[0]: unknown keys ['chunk']"}
    assert still == "a"  # repeat_last defaults to true
    assert good.json() == {"status": "ok"}
    assert replaced == ["b", "(script exhausted)"]
    assert outcomes == ["complete"] * 4


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ([], "script: must be a JSON object"),
        ({"model": []}, "script: unknown keys ['model']"),
        ({"models": "x"}, "script.models: must be a list of model names"),
        ({"responses": [{"delay": -1}]}, "'delay' must be a number >= 0"),
        ({"responses": [{"status": 99}]}, "'status' must be 200..599"),
        ({"responses": [{"stall_after": 1}]}, "'stall_after' must be null or a chunk count 0..0"),
        ({"responses": [{"chunks": [{"text": "x"}]}]}, "chunks[0]: unknown chunk keys ['text']"),
        ({"responses": [{"chunks": [{"tool_calls": [{"arguments": {}}]}]}]}, "needs a 'name'"),
        ({"repeat_last": 1}, "script.repeat_last: must be true or false"),
    ],
)
def test_bad_scripts_are_refused_with_the_reason(script: Any, message: str) -> None:
    with pytest.raises(ScriptError) as info:
        FakeOllama(script)
    assert message in str(info.value)


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        part = sock.recv(4096)
        assert part, f"connection closed before {marker!r}: {data!r}"
        data += part
    return data


def test_stop_releases_hanging_and_idle_connections() -> None:
    before = set(threading.enumerate())
    fake = FakeOllama({"responses": [{"chunks": RICH, "stall_after": 1}]}).start()
    port = int(fake.url.rsplit(":", 1)[1])
    body = json.dumps({"model": MODEL, "messages": USER}).encode()
    head = f"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    with (
        socket.create_connection(("127.0.0.1", port)) as hanging,
        socket.create_connection(("127.0.0.1", port)) as idle,
    ):
        hanging.settimeout(10)
        idle.settimeout(10)
        hanging.sendall(head.encode() + body)
        read_until(hanging, b"hmm")
        idle.sendall(b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
        read_until(idle, b"0.12.6")
        fake.stop()
        assert hanging.recv(4096) == b""
        assert idle.recv(4096) == b""
    assert fake.outcomes == ["stopped"]
    assert set(threading.enumerate()) - before == set()  # server and handler threads joined
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def read_ready(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], 20)
    assert readable, "the fake did not print READY within 20s"
    return proc.stdout.readline().strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_runs_as_a_subprocess(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [{"chunks": [{"content": "hi there"}]}]}))
    port = free_port()
    cmd = [sys.executable, "-m", "tests.fakes.ollama_server", "--script", str(script)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert read_ready(proc) == f"READY http://127.0.0.1:{port}"
        url = f"http://127.0.0.1:{port}"
        with official(url) as client:
            parts = list(client.chat(MODEL, USER, stream=True))
        assert "".join(p.message.content or "" for p in parts) == "hi there"
        assert get(f"{url}/_fake/requests").json() == [
            {"model": MODEL, "messages": USER, "tools": [], "stream": True}
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_subprocess_refuses_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"responses": {}}')
    cmd = [sys.executable, "-m", "tests.fakes.ollama_server", "--script", str(script)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "script.responses: must be a list" in done.stderr
