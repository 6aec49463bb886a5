"""Auto-detection and the choice of server, against fake servers on real loopback ports
(the port list is injected: the real ports may be taken on a test machine)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from zcoder.agent.connect import choose_server, make_client
from zcoder.agent.detect import DEFAULT_CANDIDATES, Candidate, Found, detect, nothing_found
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.servers import KINDS, kind_named
from zcoder.config import Config, RawOptions, load_config

OLLAMA, LLAMA, LMSTUDIO, VLLM = KINDS


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def llama() -> Iterator[FakeOpenAI]:
    with FakeOpenAI({"models": ["smollm2:135m"]}) as fake:
        yield fake


def test_the_real_candidates_in_preference_order() -> None:
    assert [(c.kind.name, c.port, c.probe_url, c.url) for c in DEFAULT_CANDIDATES] == [
        ("Ollama", 11434, "http://127.0.0.1:11434/api/version", "http://127.0.0.1:11434"),
        ("llama.cpp", 8080, "http://127.0.0.1:8080/v1/models", "http://127.0.0.1:8080/v1"),
        ("LM Studio", 1234, "http://127.0.0.1:1234/v1/models", "http://127.0.0.1:1234/v1"),
        ("vLLM", 8000, "http://127.0.0.1:8000/v1/models", "http://127.0.0.1:8000/v1"),
    ]


def test_nothing_found_says_what_was_tried_and_what_to_do() -> None:
    assert nothing_found() == (
        "no model server found (tried Ollama (127.0.0.1:11434), llama.cpp (127.0.0.1:8080), "
        "LM Studio (127.0.0.1:1234), vLLM (127.0.0.1:8000)): start one, run a model file "
        "with --gguf FILE (zcoder starts llama.cpp's server for it), or point zcoder at "
        "yours with --host URL (a URL ending in /v1 for an OpenAI-compatible server)"
    )


async def test_a_lone_llama_cpp_is_found(llama: FakeOpenAI) -> None:
    candidates = [
        Candidate(OLLAMA, closed_port()),
        Candidate(LLAMA, port_of(llama.url)),
        Candidate(VLLM, closed_port()),
    ]
    found = await detect(candidates)
    assert found == Found(LLAMA, candidates[1], ("smollm2:135m",))
    assert found.candidate.url == llama.url + "/v1"


async def test_the_preferred_one_wins_when_several_answer(
    ollama: FakeOllama, llama: FakeOpenAI
) -> None:
    candidates = [Candidate(OLLAMA, port_of(ollama.url)), Candidate(LLAMA, port_of(llama.url))]
    found = await detect(candidates)
    assert found is not None and found.kind.name == "Ollama"
    found = await detect(candidates[::-1])
    assert found is not None and found.kind.name == "llama.cpp"


async def test_a_server_of_another_kind_is_not_taken_for_ollama(llama: FakeOpenAI) -> None:
    # Something on Ollama's port that does not answer /api/version like Ollama.
    assert await detect([Candidate(OLLAMA, port_of(llama.url))]) is None


async def test_the_kind_comes_from_the_answer_where_it_tells() -> None:
    with FakeOpenAI(owned_by="vllm") as fake:
        found = await detect([Candidate(LLAMA, port_of(fake.url))])
    assert found is not None and found.kind.name == "vLLM"
    with FakeOpenAI(owned_by="organization_owner") as fake:
        found = await detect([Candidate(LMSTUDIO, port_of(fake.url))])
    assert found is not None and found.kind.name == "LM Studio"


async def test_a_silent_preferred_port_costs_only_the_deadline(llama: FakeOpenAI) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
        hung = listeners[0].socket.getsockname()[1]
        candidates = [Candidate(OLLAMA, hung), Candidate(LLAMA, port_of(llama.url))]
        found = await detect(candidates, deadline=0.3)
        nothing = await detect([Candidate(OLLAMA, hung)], deadline=0.3)
        nursery.cancel_scope.cancel()
    assert found is not None and found.kind.name == "llama.cpp"
    assert nothing is None


async def test_none_answers() -> None:
    assert await detect([Candidate(k, closed_port()) for k in KINDS]) is None


def config(tmp_path: Path, **opts: object) -> Config:
    return load_config(RawOptions(workspace=str(tmp_path), **opts), {})  # type: ignore[arg-type]


async def test_choose_server_auto_detects_and_takes_the_servers_model(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    candidates = [Candidate(OLLAMA, closed_port()), Candidate(LLAMA, port_of(llama.url))]
    choice = await choose_server(config(tmp_path), candidates=candidates)
    assert choice.found
    assert choice.line == f"model server: llama.cpp at {llama.url}/v1 (auto-detected)"
    c = choice.config
    assert (c.api, c.host, c.server_kind, c.model) == (
        "openai",
        llama.url + "/v1",
        "llama.cpp",
        "smollm2:135m",
    )
    client = make_client(c)
    assert isinstance(client, OpenAIClient) and client.kind.name == "llama.cpp"
    await client.aclose()


async def test_choose_server_keeps_a_model_the_user_chose(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    candidates = [Candidate(LLAMA, port_of(llama.url))]
    choice = await choose_server(config(tmp_path, model="mine"), candidates=candidates)
    assert choice.config.model == "mine"


async def test_choose_server_with_api_openai_probes_only_openai_servers(
    tmp_path: Path, ollama: FakeOllama
) -> None:
    candidates = [Candidate(OLLAMA, port_of(ollama.url)), Candidate(LLAMA, closed_port())]
    choice = await choose_server(config(tmp_path, api="openai"), candidates=candidates)
    assert not choice.found
    assert choice.line.startswith("no model server found (tried llama.cpp (127.0.0.1:")


async def test_choose_server_names_an_explicit_openai_host(
    tmp_path: Path, llama: FakeOpenAI
) -> None:
    choice = await choose_server(config(tmp_path, host=llama.url + "/v1"))
    assert choice.line == f"model server: llama.cpp at {llama.url}/v1"
    down = await choose_server(config(tmp_path, host=f"127.0.0.1:{closed_port()}/v1"))
    assert down.found and down.config.server_kind == "OpenAI-compatible server"


async def test_choose_server_for_an_explicit_ollama_host(tmp_path: Path) -> None:
    choice = await choose_server(config(tmp_path, host="127.0.0.1:9"))
    assert choice.line == "model server: Ollama at http://127.0.0.1:9"
    client = make_client(choice.config)
    assert isinstance(client, OllamaClient)
    await client.aclose()


def test_fixes_are_per_kind() -> None:
    assert kind_named("vLLM") is VLLM and kind_named("nope") is None


def _oneshot(args: list[str], workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),
    )


def test_oneshot_through_the_openai_api(tmp_path: Path) -> None:
    script = {"models": ["smollm2:135m"], "responses": [{"chunks": [{"content": "Hi there"}]}]}
    with FakeOpenAI(script) as fake:
        done = _oneshot(["--host", fake.url + "/v1", "-p", "hello"], tmp_path)
        requests = fake.requests
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hi there"
    assert "session: " in done.stderr
    assert requests[0]["model"] == "smollm2:135m"  # the server's own model, none was chosen
    assert requests[0]["messages"][-1] == {"role": "user", "content": "hello"}


def test_oneshot_with_the_api_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZCODER_API_KEY", "sk-local-secret")
    with FakeOpenAI({"responses": [{"chunks": [{"content": "ok"}]}]}) as fake:
        done = _oneshot(["--api", "openai", "--host", fake.url, "-p", "hello"], tmp_path)
        auth = set(fake.authorizations)
    assert done.returncode == 0, done.stderr
    assert auth == {"Bearer sk-local-secret"}
    assert "sk-local-secret" not in done.stderr + done.stdout


def test_oneshot_errors_name_the_server_in_use(tmp_path: Path) -> None:
    script = {"responses": [{"status": 500, "error": "the prompt exceeds the context size"}]}
    with FakeOpenAI(script) as fake:
        done = _oneshot(["--host", fake.url + "/v1", "-p", "hello"], tmp_path)
    assert done.returncode == 1
    assert "llama.cpp error (HTTP 500): the prompt exceeds the context size" in done.stderr
    assert "ollama" not in done.stderr.lower()
