"""What zcoder learns from, and says about, a real llama.cpp server (no generation needed):
the server kind and its context window, and the Ollama API asked of it."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.realmodel.llama_server import LlamaServer

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(300)]


@pytest.fixture
def openai() -> ModuleType:
    # A sync fixture: a skip raised inside a trio test loses its reason.
    try:
        return importlib.import_module("zcoder.agent.openai")
    except ImportError:
        pytest.skip("zcoder.agent.openai is not merged yet")


async def test_the_client_learns_kind_and_context_window(
    openai: ModuleType, plain_server: LlamaServer
) -> None:
    async with openai.OpenAIClient(f"{plain_server.url}/v1") as probe:
        kind, models = await probe.identify()
        assert kind is not None and kind.name == "llama.cpp"
        assert models, "a llama.cpp server lists the model it serves"
    async with openai.OpenAIClient(f"{plain_server.url}/v1", kind=kind) as client:
        # The harness starts it with n_ctx 4096; any model name is the one it serves.
        assert await client.context_length("smollm2") == 4096


def test_the_ollama_api_asked_of_llama_cpp_names_the_fix(
    openai: ModuleType, plain_server: LlamaServer, tmp_path: Path
) -> None:
    argv = [sys.executable, "-m", "zcoder", "-w", str(tmp_path), "--no-warmup", "-m", "smollm2"]
    argv += ["--api", "ollama", "--host", plain_server.url, "--prompt", "hi"]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=dict(os.environ),
    )
    assert done.returncode == 1, done.stderr
    assert "speaks the OpenAI-compatible API" in done.stderr, done.stderr
    assert "--api openai" in done.stderr, done.stderr
    assert "ollama pull" not in done.stderr, done.stderr
