"""The OpenAI-compatible model client: ``POST /v1/chat/completions`` streamed as server-sent
events over httpx, for llama.cpp, LM Studio, vLLM, Ollama's ``/v1`` and the like.

The same guarantees as ``OllamaClient`` (``agent/ollama.py``), from the same HTTP half
(``agent/http_client.py``: the one retry, the stall deadlines, httpx's exceptions turned
into ``ModelError`` subclasses); leaving ``stream_chat`` (done, error or cancel) closes the
response at once.

The API key, when there is one, is sent as ``Authorization: Bearer`` and nowhere else: it
is not in any message, log line or repr (httpx masks the header in its own repr).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio

from zcoder.agent.http_client import HttpModelClient
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo, StallLimits
from zcoder.agent.openai_stream import EventChunkStream
from zcoder.agent.openai_wire import decode_models, encode_chat_request, model_entries
from zcoder.agent.response_stream import close_response
from zcoder.agent.servers import GENERIC, KINDS, ServerKind, WindowReport, kind_from_models
from zcoder.errors import (
    ModelError,
    ModelHTTPError,
    ServerUnavailable,
    StreamStalled,
)

__all__ = ["OpenAIClient"]


def _positive_int(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


class OpenAIClient(HttpModelClient):
    """A ``ModelClient`` for one OpenAI-compatible server.

    ``base_url`` ends with the API's version prefix (``http://127.0.0.1:8080/v1``); the
    server's own extra endpoints (llama.cpp's ``/props``, LM Studio's ``/api/v0``) are
    asked at the URL without it. ``kind`` names the server in messages; ``identify``
    can learn it from the server.
    """

    def __init__(
        self,
        base_url: str,
        *,
        kind: ServerKind = GENERIC,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stall: StallLimits | None = None,
        connect_seconds: float = 10.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            base_url,
            transport=transport,
            stall=stall,
            connect_seconds=connect_seconds,
            headers=headers,
        )
        self.root_url = self.base_url.removesuffix("/v1")
        self._kind = kind  # ``identify`` only reports a kind: it never changes this one

    def __repr__(self) -> str:
        return f"OpenAIClient({self.base_url!r}, kind={self.kind.name!r})"

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        """Stream one reply; leaving the block (even by cancel) closes the connection."""
        body = encode_chat_request(request)
        first_by = trio.current_time() + self._stall.first_token
        response = await self._open(
            "POST", "/chat/completions", body, model=request.model, by=first_by
        )
        chunks = EventChunkStream(response, self._stall, first_by)
        try:
            yield chunks
        finally:
            await close_response(response, chunks)

    async def list_models(self) -> list[ModelInfo]:
        """The served models (``GET /v1/models``)."""
        return decode_models(await self._json("GET", "/models"))

    async def identify(self) -> tuple[ServerKind | None, list[ModelInfo]]:
        """The kind the server gives away (``None``: it does not say) and the served
        models. A report: the kind is ``connect.choose_server``'s to decide."""
        body = await self._json("GET", "/models")
        models = decode_models(body)
        kind = kind_from_models(body)
        for other in (k for k in KINDS if k.own_api and kind is None):
            if await self._answers(f"{self.root_url}{other.own_api}"):
                kind = other  # its /v1 says nothing of itself; its own API does
        return kind, models

    async def context_length(self, model: str) -> int | None:
        """The context window the server runs ``model`` with, where it says so.

        Where the kind says it (``ServerKind.window``). llama.cpp: ``meta.n_ctx`` in
        ``/v1/models``, else ``GET /props`` ``default_generation_settings.n_ctx`` (or
        ``n_ctx``; ``/props`` may be off);
        vLLM: ``max_model_len`` in ``/v1/models``; LM Studio: ``loaded_context_length`` of
        ``/api/v0/models/NAME``; Ollama: the ``context_length`` ``/api/ps`` reports for
        the loaded model (through ``/v1`` it runs with its default, not the model's
        maximum). Anything else, or an answer that is not usable: ``None``.
        """
        try:
            reports: dict[WindowReport, Callable[[str], Awaitable[int | None]]] = {
                "n_ctx": self._n_ctx,
                "loaded_context_length": self._loaded_context_length,
                "api_ps": self._ollama_context,
                "max_model_len": self._max_model_len,
            }
            return await reports[self.kind.window](model)
        except (ServerUnavailable, StreamStalled):
            raise
        except (ModelError, AttributeError):
            return None  # not reported, or not in a shape zcoder knows

    async def _n_ctx(self, model: str) -> int | None:
        for entry in model_entries(await self._json("GET", "/models")):
            if n_ctx := _positive_int((entry.get("meta") or {}).get("n_ctx")):
                return n_ctx  # one model per server: whatever name was asked
        props = await self._json("GET", f"{self.root_url}/props")
        settings = props.get("default_generation_settings") or {}
        return _positive_int(settings.get("n_ctx")) or _positive_int(props.get("n_ctx"))

    async def _loaded_context_length(self, model: str) -> int | None:
        entry = await self._json("GET", f"{self.root_url}/api/v0/models/{model}")
        return _positive_int(entry.get("loaded_context_length"))

    async def _max_model_len(self, model: str) -> int | None:
        for entry in model_entries(await self._json("GET", "/models")):
            if entry["id"] == model:
                return _positive_int(entry.get("max_model_len"))
        return None

    async def _ollama_context(self, model: str) -> int | None:
        body = await self._json("GET", f"{self.root_url}/api/ps")
        for entry in body.get("models") or []:
            if entry.get("name") == model or entry.get("model") == model:
                return _positive_int(entry.get("context_length"))
        return None

    async def _answers(self, url: str) -> bool:
        try:
            await self._json("GET", url)
        except (ServerUnavailable, StreamStalled):
            raise
        except ModelError:
            return False
        return True

    async def _http_failure(self, status: int, text: str, model: str) -> ModelHTTPError:
        missing = status == 404 and bool(model) and "model" in text.lower()
        return ModelHTTPError(status, text, model_missing=missing)
