"""The Ollama model client: ``POST /api/chat`` streamed over httpx, errors made plain.

With ``ollama_stream.py`` (reading a response body), the only place in zcoder that imports
httpx. Its exceptions stop here: callers see the ``ModelError`` subclasses of ``errors.py``
and nothing else.

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

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import httpx
import trio

import zcoder
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo, StallLimits
from zcoder.agent.ollama_stream import ChunkStream, close_response, describe, stall_text
from zcoder.agent.ollama_wire import (
    ShowInfo,
    decode_models,
    decode_show,
    encode_chat_request,
    error_text,
)
from zcoder.errors import (
    MalformedStream,
    ModelHTTPError,
    ServerUnavailable,
    StreamStalled,
)

__all__ = ["OllamaClient", "ShowInfo"]

# Failures that happen before the server said anything: the request was not answered.
_RETRYABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
_RETRY_PAUSE = 0.25
_MAX_BODY = 1024 * 1024
_MAX_ERROR_BODY = 64 * 1024
_PROBE_SECONDS = 2.0


class OllamaClient:
    """A ``ModelClient`` for one Ollama server (``base_url`` like ``http://127.0.0.1:11434``)."""

    kind = "Ollama"

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        stall: StallLimits | None = None,
        connect_seconds: float = 10.0,
    ) -> None:
        if not connect_seconds > 0:
            raise ValueError("connect_seconds must be positive")
        self.base_url = base_url.rstrip("/")
        self._stall = stall or StallLimits()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            # Reads are bounded by the stall deadline in trio, not by httpx.
            timeout=httpx.Timeout(connect=connect_seconds, read=None, write=None, pool=None),
            headers={"User-Agent": f"zcoder/{zcoder.__version__}"},
            # A proxy from the environment in front of a local model server is a trap.
            trust_env=False,
            # Plain http (the usual Ollama URL) never does TLS, as redirects are not
            # followed: skip loading the CA bundle, which costs 0.1-0.7 s at start-up.
            verify=not self.base_url.startswith("http://"),
        )

    async def __aenter__(self) -> OllamaClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

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

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _json(self, method: str, path: str, body: Any = None, *, model: str = "") -> Any:
        response = await self._open(method, path, body, model=model)
        raw = await self._read_all(response, _MAX_BODY)
        try:
            return json.loads(raw)
        except ValueError:
            raise MalformedStream(f"{method} {path}: the answer is not JSON") from None

    async def _open(
        self, method: str, path: str, body: Any, *, model: str, by: float | None = None
    ) -> httpx.Response:
        """Send with one retry; ``by`` is the deadline for the response head (trio's clock,
        default ``between_tokens`` from now)."""
        request = self._http.build_request(method, path, json=body)
        first = by is not None
        by = by if by is not None else trio.current_time() + self._stall.between_tokens
        response = await self._send_with_retry(request, by, first)
        if response.status_code < 400:
            return response
        raw = await self._read_all(response, _MAX_ERROR_BODY)
        text = error_text(raw)
        missing = response.status_code == 404 and bool(model) and "model" in text.lower()
        openai = response.status_code == 404 and not missing and await self._speaks_openai()
        raise ModelHTTPError(
            response.status_code,
            self._http_error(response.status_code, text, model, missing, openai),
            kind=self.kind,
            model_missing=missing,
            speaks_openai=openai,
        )

    async def _send_with_retry(
        self, request: httpx.Request, by: float, first: bool
    ) -> httpx.Response:
        try:
            return await self._send(request, by, first)
        except _RETRYABLE:
            pass
        await trio.sleep(_RETRY_PAUSE)
        try:
            return await self._send(request, by, first)
        except _RETRYABLE as exc:
            raise self._unavailable(exc) from None

    async def _send(self, request: httpx.Request, by: float, first: bool) -> httpx.Response:
        try:
            with trio.fail_at(by):
                return await self._http.send(request, stream=True)
        except trio.TooSlowError:
            if first:
                raise StreamStalled(stall_text(self._stall, first=True)) from None
            raise StreamStalled(
                f"the model server at {self.base_url} did not answer within "
                f"{self._stall.between_tokens:g}s"
            ) from None
        except _RETRYABLE:
            raise
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: BaseException) -> ServerUnavailable:
        reason = describe(exc)
        return ServerUnavailable(
            f"cannot reach Ollama at {self.base_url} ({reason}); is `ollama serve` running?",
            reason=reason,
            kind=self.kind,
        )

    async def _read_all(self, response: httpx.Response, limit: int) -> bytes:
        """Up to ``limit`` bytes of a (small) body, then the response is closed."""
        parts: list[bytes] = []
        size = 0
        reader = ChunkStream(response, self._stall)
        try:
            while size < limit and (data := await reader.read_raw()) is not None:
                parts.append(data)
                size += len(data)
        finally:
            await close_response(response, reader)
        return b"".join(parts)[:limit]

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
