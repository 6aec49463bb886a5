"""Which model server this run talks to, and the client for it.

``choose_server`` settles what the configuration left open: the host (auto-detected when
none was configured), the server kind (named by the server where it tells), and for an
OpenAI-compatible server that serves its own models, the model when the user chose none.
It returns the start-up line that says so. A host given without ``/v1`` where an
OpenAI-compatible server answers (llama.cpp on ``--host 127.0.0.1:8080``) is taken as that
server's ``/v1``, and the line says where it was found. ``make_client`` builds the client of
that API; after auto-detection found nothing, a client that looks again at every request
(and says, until a server answers, only what was tried).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self

import attrs
import trio

from zcoder.agent.detect import DEFAULT_CANDIDATES, Candidate, Found, api_at, detect, nothing_found
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo, StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.servers import OLLAMA, ServerKind, default_kind, kind_named
from zcoder.config import Config
from zcoder.errors import ModelError, NoServerFound

__all__ = ["NoServer", "ServerChoice", "choose_server", "describe", "kind_of", "make_client"]

_IDENTIFY_SECONDS = 2.0


@attrs.frozen
class ServerChoice:
    """The settled configuration and the line to show; ``found`` is False when
    auto-detection found nothing (``line`` then says what was tried)."""

    config: Config
    line: str
    found: bool = True


def make_client(config: Config) -> OllamaClient | OpenAIClient | NoServer:
    """The client for ``config.api`` at ``config.host`` (``config.server_kind`` in messages);
    a ``NoServer`` when auto-detection found nothing (``config.server_missing``)."""
    if config.server_missing:
        return NoServer(config)
    stall = StallLimits.of(config)
    if config.api == "openai":
        return OpenAIClient(config.host, kind=kind_of(config), api_key=config.api_key, stall=stall)
    return OllamaClient(config.host, stall=stall)


def kind_of(config: Config) -> ServerKind:
    """The kind of server ``config`` names (``server_kind``), else its API's default."""
    return kind_named(config.server_kind) or default_kind(config.api)


def describe(config: Config) -> str:
    """``llama.cpp at http://127.0.0.1:8080/v1 (auto-detected)`` and the like."""
    note = f" ({config.server_note})" if config.server_note else ""
    return f"{kind_of(config).name} at {config.host}{note}"


def _candidates(config: Config, candidates: Sequence[Candidate]) -> list[Candidate]:
    return [c for c in candidates if not config.api_given or c.kind.api == config.api]


def _found(config: Config, found: Found) -> Config:
    return attrs.evolve(
        config,
        host=found.candidate.url,
        api=found.candidate.kind.api,
        server_kind=found.kind.name,
        server_note="auto-detected",
        server_missing="",
    )


async def choose_server(
    config: Config, *, candidates: Sequence[Candidate] = DEFAULT_CANDIDATES
) -> ServerChoice:
    """Settle host, kind and (for a default model on an OpenAI server) the model."""
    models: tuple[str, ...] = ()
    if config.autodetect:
        candidates = _candidates(config, candidates)
        found = await detect(candidates)
        if found is None:
            line = nothing_found(candidates)
            return ServerChoice(attrs.evolve(config, server_missing=line), line, found=False)
        config = _found(config, found)
        models = found.models
    else:
        if config.api == "ollama" and not config.api_given:
            config = await _openai_instead(config)
        if config.api == "ollama":
            config = attrs.evolve(config, server_kind=OLLAMA.name)
        else:
            kind, models = await _identify(config)
            config = attrs.evolve(config, server_kind=kind.name)
    if config.api == "openai" and config.model_default and models and config.model not in models:
        config = attrs.evolve(config, model=models[0])
    return ServerChoice(config, f"model server: {describe(config)}")


async def _openai_instead(config: Config) -> Config:
    """A host given without ``/v1`` (so taken for Ollama) where an OpenAI-compatible server
    answers instead: that server's ``/v1``, noting where it was found."""
    if await api_at(config.host, api_key=config.api_key) != "openai":
        return config
    where = config.host_source or config.host
    return attrs.evolve(
        config, api="openai", host=config.host + "/v1", server_note=f"found at {where}"
    )


async def _identify(config: Config) -> tuple[ServerKind, tuple[str, ...]]:
    """Ask an OpenAI-compatible server what it is; a server that does not answer now is
    not an error here (the first request will say what is wrong)."""
    # A kind already known (zcoder's own llama.cpp) stays when the server cannot tell now.
    async with OpenAIClient(config.host, kind=kind_of(config), api_key=config.api_key) as client:
        with trio.move_on_after(_IDENTIFY_SECONDS):
            try:
                kind, models = await client.identify()
            except ModelError:
                return kind_of(config), ()
            return kind or kind_of(config), tuple(m.name for m in models)
    return kind_of(config), ()


class NoServer:
    """The client of a run that found no model server: every request looks again (the
    auto-detection of ``choose_server``) and, once a server answers, goes to it from then
    on. Until then each raises ``NoServerFound`` with the line of what was tried."""

    def __init__(
        self, config: Config, *, candidates: Sequence[Candidate] = DEFAULT_CANDIDATES
    ) -> None:
        self._config = config
        self._candidates = _candidates(config, candidates)
        self._inner: OllamaClient | OpenAIClient | None = None

    @property
    def kind(self) -> ServerKind:
        return self._inner.kind if self._inner is not None else default_kind(self._config.api)

    async def _client(self) -> OllamaClient | OpenAIClient:
        if self._inner is None:
            found = await detect(self._candidates)
            if found is None:
                raise NoServerFound(nothing_found(self._candidates))
            inner = make_client(_found(self._config, found))
            assert not isinstance(inner, NoServer)
            self._inner = inner
        return self._inner

    async def context_length(self, model: str) -> int | None:
        return await (await self._client()).context_length(model)

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        client = await self._client()
        async with client.stream_chat(request) as chunks:
            yield chunks

    async def list_models(self) -> list[ModelInfo]:
        return await (await self._client()).list_models()

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
