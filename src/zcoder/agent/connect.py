"""Which model server this run talks to, and the client for it.

``choose_server`` settles what the configuration left open: the host (auto-detected when
none was configured), the server kind (named by the server where it tells), and for an
OpenAI-compatible server that serves its own models, the model when the user chose none.
It returns the start-up line that says so. ``make_client`` builds the client of that API.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from zcoder.agent.detect import DEFAULT_CANDIDATES, Candidate, detect, nothing_found
from zcoder.agent.model import StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.servers import GENERIC
from zcoder.config import Config
from zcoder.errors import ModelError

__all__ = ["ServerChoice", "choose_server", "make_client"]

_IDENTIFY_SECONDS = 2.0


@attrs.frozen
class ServerChoice:
    """The settled configuration and the line to show; ``found`` is False when
    auto-detection found nothing (``line`` then says what was tried)."""

    config: Config
    line: str
    found: bool = True


def make_client(config: Config) -> OllamaClient | OpenAIClient:
    """The client for ``config.api`` at ``config.host`` (``config.server_kind`` in messages)."""
    stall = StallLimits.of(config)
    if config.api == "openai":
        kind = config.server_kind or GENERIC
        return OpenAIClient(config.host, kind=kind, api_key=config.api_key, stall=stall)
    return OllamaClient(config.host, stall=stall)


def describe(config: Config) -> str:
    """``llama.cpp at http://127.0.0.1:8080/v1 (auto-detected)`` and the like."""
    kind = config.server_kind or ("Ollama" if config.api == "ollama" else GENERIC)
    return f"{kind} at {config.host}" + (" (auto-detected)" if config.autodetect else "")


async def choose_server(
    config: Config, *, candidates: Sequence[Candidate] = DEFAULT_CANDIDATES
) -> ServerChoice:
    """Settle host, kind and (for a default model on an OpenAI server) the model."""
    models: tuple[str, ...] = ()
    if config.autodetect:
        if config.api_given:
            candidates = [c for c in candidates if c.kind.api == config.api]
        found = await detect(candidates)
        if found is None:
            return ServerChoice(config, nothing_found(candidates), found=False)
        config = attrs.evolve(
            config, host=found.candidate.url, api=found.candidate.kind.api, server_kind=found.name
        )
        models = found.models
    elif config.api == "ollama":
        config = attrs.evolve(config, server_kind="Ollama")
    else:
        kind, models = await _identify(config)
        config = attrs.evolve(config, server_kind=kind)
    if config.api == "openai" and config.model_default and models and config.model not in models:
        config = attrs.evolve(config, model=models[0])
    return ServerChoice(config, f"model server: {describe(config)}")


async def _identify(config: Config) -> tuple[str, tuple[str, ...]]:
    """Ask an OpenAI-compatible server what it is; a server that does not answer now is
    not an error here (the first request will say what is wrong)."""
    async with OpenAIClient(config.host, api_key=config.api_key) as client:
        with trio.move_on_after(_IDENTIFY_SECONDS):
            try:
                models = await client.identify()
            except ModelError:
                return client.kind, ()
            return client.kind, tuple(m.name for m in models)
    return GENERIC, ()
