"""The Ollama model client: ``POST /api/chat`` streamed over httpx, errors made plain.

With ``http_client.py`` (the HTTP half it shares with the OpenAI-compatible client) and
``response_stream.py`` (reading a response body), the only place in zcoder that imports httpx.
Its exceptions stop here: callers see the ``ModelError`` subclasses of ``errors.py`` and
nothing else.

- A connection failure before any response byte is retried exactly once, after a short
  pause; a failure once the response has started, or an HTTP error status, never is.
- The stall limits (``StallLimits``) bound every wait: from sending a chat request to its
  first chunk (the response head included, both attempts of a retry together)
  ``first_token``, then ``between_tokens`` for each later piece, and for every wait of the
  small JSON requests. They are trio deadlines around each read because httpx's own read
  timeout would outlive a cancelled turn's intent.
- Leaving ``stream_chat`` (done, error or cancel) closes the response at once, which drops
  the connection if the reply was not complete: the server stops generating.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import trio

from zcoder.agent.http_client import HttpModelClient
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.agent.ollama_wire import ShowInfo, decode_models, decode_show, encode_chat_request
from zcoder.agent.response_stream import ChunkStream, close_response
from zcoder.agent.servers import OLLAMA
from zcoder.errors import MalformedStream, ModelHTTPError

__all__ = ["OllamaClient", "ShowInfo"]

_PROBE_SECONDS = 2.0


class OllamaClient(HttpModelClient):
    """A ``ModelClient`` for one Ollama server (``base_url`` like ``http://127.0.0.1:11434``)."""

    _kind = OLLAMA

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        """Stream one reply; leaving the block (even by cancel) closes the connection."""
        body = encode_chat_request(request)
        first_by = trio.current_time() + self._stall.first_token
        response = await self._open("POST", "/api/chat", body, model=request.model, by=first_by)
        chunks = ChunkStream(response, self._stall, first_by)
        try:
            yield chunks
        finally:
            await close_response(response, chunks)

    async def list_models(self) -> list[ModelInfo]:
        """The installed models (``GET /api/tags``)."""
        return decode_models(await self._json("GET", "/api/tags"))

    async def version(self) -> str:
        """The server's version string (``GET /api/version``)."""
        body = await self._json("GET", "/api/version")
        version = body.get("version") if isinstance(body, dict) else None
        if not isinstance(version, str):
            raise MalformedStream(f"/api/version answer has no version: {body!r:.80}")
        return version

    async def show(self, model: str) -> ShowInfo:
        """Context length and capabilities of one model (``POST /api/show``)."""
        body = await self._json("POST", "/api/show", {"model": model}, model=model)
        return decode_show(body, model)

    async def context_length(self, model: str) -> int | None:
        """The model's context length from ``/api/show``; None when it says none.

        Ollama's is the model's trained maximum: ``num_ctx`` decides how much of it a
        request gets, so the caller sends the smaller of the two.
        """
        try:
            return (await self.show(model)).context_length
        except (ModelHTTPError, MalformedStream):
            # An old server, an unknown model (the chat will say so) or an odd answer:
            # "not reported" rather than a failure.
            return None

    async def _http_failure(self, status: int, text: str, model: str) -> ModelHTTPError:
        missing = status == 404 and bool(model) and "model" in text.lower()
        openai = status == 404 and not missing and await self._speaks_openai()
        return ModelHTTPError(
            status,
            self._http_error(status, text, model, missing, openai),
            model_missing=missing,
            speaks_openai=openai,
        )

    async def _speaks_openai(self) -> bool:
        """After a 404 on Ollama's paths: does this server answer ``GET /v1/models``?"""
        try:
            with trio.move_on_after(_PROBE_SECONDS):
                response = await self._http.get("/v1/models")
                answered = response.status_code == 200 and "data" in response.json()
                return answered and isinstance(response.json()["data"], list)
        except (httpx.HTTPError, ValueError, TypeError):
            pass
        return False

    def _http_error(self, status: int, text: str, model: str, missing: bool, openai: bool) -> str:
        if missing:
            return f"{text}; run `ollama pull {model}` to download it"
        if openai:
            return (
                f"{text}: {self.base_url} speaks the OpenAI-compatible API, not Ollama's; "
                "use --api openai or a host ending in /v1"
            )
        if status == 404:
            return f"{text}; is {self.base_url} an Ollama server?"
        return text
