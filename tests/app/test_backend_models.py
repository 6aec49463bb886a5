"""``/model NAME``: which served model a name means, and the fix for a name not served,
in the words of the server it runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.doubles import RecordingSink, make_config
from zcoder.agent.servers import kind_named
from zcoder.app.backend import AgentBackend
from zcoder.errors import CommandError
from zcoder.session.store import SessionStore


class _Kind:
    def __init__(self, kind: str) -> None:
        self.kind = kind_named(kind)


class _NoApprover:
    async def ask(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no question expected")


def _backend(tmp_path: Path, kind: str) -> AgentBackend:
    config = make_config(tmp_path, model="m")
    store = SessionStore(config.home, tmp_path, "coding")
    return AgentBackend(
        config,
        store,
        store.create("m"),
        cast(Any, _Kind(kind)),
        approver=cast(Any, _NoApprover()),
        sink=RecordingSink(),
    )


def test_a_bare_name_means_its_latest_tag(tmp_path: Path) -> None:
    backend = _backend(tmp_path, "Ollama")
    models = ["llama3:latest", "qwen3:8b"]
    assert backend.served_name("llama3", models) == "llama3:latest"
    assert backend.served_name("qwen3:8b", models) == "qwen3:8b"
    with pytest.raises(CommandError, match="run `ollama pull qwen3`"):
        backend.served_name("qwen3", models)  # only qwen3:8b is there, not :latest


@pytest.mark.parametrize(
    ("kind", "fix"),
    [("llama.cpp", "llama.cpp"), ("LM Studio", "lms load"), ("vLLM", "vLLM serves only")],
)
def test_other_servers_are_not_told_to_ollama_pull(tmp_path: Path, kind: str, fix: str) -> None:
    with pytest.raises(CommandError) as caught:
        _backend(tmp_path, kind).served_name("llama3", ["smollm2"])
    assert "ollama pull" not in str(caught.value)
    assert f"is not served by {kind}" in str(caught.value) and fix in str(caught.value)


class _Served:
    def __init__(self, kind: str, names: list[str]) -> None:
        self.kind = kind_named(kind)
        self._names = names

    async def list_models(self) -> list[Any]:
        return [type("Info", (), {"name": n})() for n in self._names]


@pytest.mark.parametrize("kind", ["OpenAI-compatible server", "vLLM", "LM Studio"])
async def test_a_server_that_serves_one_other_model_is_used_with_it(
    tmp_path: Path, kind: str
) -> None:
    config = make_config(tmp_path, model="qwen3-coder")
    store = SessionStore(config.home, tmp_path, "coding")
    sink = RecordingSink()
    backend = AgentBackend(
        config,
        store,
        store.create("qwen3-coder"),
        cast(Any, _Served(kind, ["smollm2"])),
        approver=cast(Any, _NoApprover()),
        sink=sink,
    )
    assert await backend.runner.check_model() == ""
    assert backend.model == "smollm2"
    (line,) = [e.text for e in sink.entries() if e.role == "system"]
    assert "serves only 'smollm2': using it" in line


async def test_ollama_with_one_other_model_still_says_how_to_pull(tmp_path: Path) -> None:
    config = make_config(tmp_path, model="qwen3-coder")
    store = SessionStore(config.home, tmp_path, "coding")
    backend = AgentBackend(
        config,
        store,
        store.create("qwen3-coder"),
        cast(Any, _Served("Ollama", ["llama3:latest"])),
        approver=cast(Any, _NoApprover()),
        sink=RecordingSink(),
    )
    assert "ollama pull qwen3-coder" in await backend.runner.check_model()
    assert backend.model == "qwen3-coder"
