"""``/model NAME``: which served model a name means, and the fix for a name not served,
in the words of the server it runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.doubles import RecordingSink, make_config
from zcoder.app.backend import AgentBackend
from zcoder.errors import CommandError
from zcoder.session.store import SessionStore


class _Kind:
    def __init__(self, kind: str) -> None:
        self.kind = kind


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
