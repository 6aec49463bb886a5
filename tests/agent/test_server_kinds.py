"""The table of server kinds (``agent/servers.py``): what each kind carries, that behaviour
follows those fields (a new OpenAI-compatible kind is one row), and that every failure line
names the kind in use, never Ollama for another server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.agent.doubles import make_config
from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_server import FakeOpenAI
from zcoder.agent.connect import describe, kind_of
from zcoder.agent.detect import DEFAULT_CANDIDATES
from zcoder.agent.model import ChatRequest, ModelClient
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.rounds import describe_model_error
from zcoder.agent.servers import (
    GENERIC,
    KINDS,
    LLAMA_CPP,
    OLLAMA,
    ServerKind,
    default_kind,
    kind_from_models,
    kind_named,
)
from zcoder.conversation import Message
from zcoder.errors import ModelError

MODEL = "smollm2:135m"


def test_every_kind_has_its_own_name_port_and_fix() -> None:
    names = [k.name for k in (*KINDS, GENERIC)]
    assert len(set(names)) == len(names)
    ports = [k.port for k in KINDS]
    assert all(ports) and len(set(ports)) == len(ports) and GENERIC.port == 0
    for kind in (*KINDS, GENERIC):
        assert kind_named(kind.name) is kind
        assert kind.start.endswith("?")
        fix = kind.missing_model_fix("m:1")
        assert fix.endswith(", or pick a served model with /model")
        assert ("ollama pull" in fix) == (kind is OLLAMA)
        if kind.api == "openai":
            assert kind.probe == "/v1/models"
    assert kind_named("nope") is None
    # Auto-detection tries every kind that has a port, in the table's order.
    assert [c.kind for c in DEFAULT_CANDIDATES] == list(KINDS)


def test_flags_say_what_differs() -> None:
    assert [k.name for k in KINDS if k.serves_any_name] == ["llama.cpp"]
    assert [k.name for k in KINDS if k.loads_by_name] == ["Ollama"]
    assert {k.name: k.window for k in KINDS} == {
        "Ollama": "api_ps",
        "llama.cpp": "n_ctx",
        "LM Studio": "loaded_context_length",
        "vLLM": "max_model_len",
    }
    assert default_kind("ollama") is OLLAMA and default_kind("openai") is GENERIC


@pytest.mark.parametrize(
    ("owned_by", "name"),
    [("llamacpp", "llama.cpp"), ("vllm", "vLLM"), ("library", "Ollama"), ("LlamaCpp", "llama.cpp")],
)
def test_a_models_listing_gives_its_kind_away(owned_by: str, name: str) -> None:
    body = {"data": [{"id": "m", "owned_by": owned_by}]}
    assert (found := kind_from_models(body)) is not None and found.name == name


def test_a_listing_that_says_nothing_names_no_kind() -> None:
    assert kind_from_models({"data": [{"id": "m", "owned_by": "organization_owner"}]}) is None
    assert kind_from_models({"nope": 1}) is None and kind_from_models([]) is None


def test_the_configured_kind_is_found_by_its_name(tmp_path: Path) -> None:
    config = make_config(tmp_path, api="openai", host="http://h/v1")
    assert kind_of(config) is GENERIC
    assert kind_of(attrs.evolve(config, server_kind="LM Studio")).name == "LM Studio"
    assert kind_of(attrs.evolve(config, api="ollama")) is OLLAMA
    assert describe(attrs.evolve(config, server_kind="vLLM")) == "vLLM at http://h/v1"


# A kind zcoder never heard of, added as one row: nothing else changes.
_NEW = ServerKind(
    "Foo Server",
    "openai",
    9999,
    "/v1/models",
    "is `foo serve` running?",
    "load it with `foo load {model}`",
    owners=("foo",),
)


async def test_a_new_kind_is_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import zcoder.agent.servers as servers

    monkeypatch.setattr(servers, "KINDS", (*servers.KINDS, _NEW))
    script = {"models": [MODEL], "responses": [{"chunks": [{"content": "a"}], "no_done": True}]}
    with FakeOpenAI(script, owned_by="foo") as fake:
        async with OpenAIClient(fake.url + "/v1") as probe:
            assert (await probe.identify())[0] is _NEW
        async with OpenAIClient(fake.url + "/v1", kind=_NEW) as client:
            with pytest.raises(ModelError) as info:
                async with client.stream_chat(_request()) as chunks:
                    async for _ in chunks:
                        pass
                raise AssertionError("the script fails the reply")
    assert client.kind.window == "max_model_len"
    line = describe_model_error(info.value, client.kind, "http://h", MODEL)
    assert line.startswith("the reply from Foo Server ended early")


def _request() -> ChatRequest:
    return ChatRequest(model=MODEL, messages=[Message("user", "hi")])


_FAILURES: list[tuple[dict[str, Any], str]] = [
    ({"no_done": True}, "the reply from {kind} ended early"),
    ({"malformed_after": 0}, "{kind} sent an invalid reply"),
    ({"error_line_after": 0, "error": "oom"}, "{kind} reported an error"),
    ({"status": 500, "error": "runner crashed"}, "{kind} error (HTTP 500): runner crashed"),
]


@pytest.mark.parametrize(("failure", "start"), _FAILURES)
@pytest.mark.parametrize("server", ["Ollama", "llama.cpp"])
async def test_every_failure_names_the_kind_in_use(
    server: str, failure: dict[str, Any], start: str
) -> None:
    response = {"chunks": [{"content": "half"}], **failure}
    script = {"models": [MODEL], "responses": [response]}
    fake = FakeOllama(script) if server == "Ollama" else FakeOpenAI(script)
    with fake:
        client: ModelClient
        if server == "Ollama":
            client = OllamaClient(fake.url)
        else:
            client = OpenAIClient(fake.url + "/v1", kind=LLAMA_CPP)
        async with client:
            with pytest.raises(ModelError) as info:
                async with client.stream_chat(_request()) as chunks:
                    async for _ in chunks:
                        pass
    line = describe_model_error(info.value, client.kind, "http://h", MODEL)
    assert line.startswith(start.format(kind=server)), line
    other = "llama.cpp" if server == "Ollama" else "Ollama"
    assert other not in line and other.lower() not in line
