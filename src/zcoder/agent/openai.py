"""The OpenAI-compatible model client: ``POST /v1/chat/completions`` streamed as server-sent
events over httpx, for llama.cpp, LM Studio, vLLM, Ollama's ``/v1`` and the like.

The same guarantees as ``OllamaClient`` (``agent/ollama.py``), which it mirrors:

- A connection failure before any response byte is retried exactly once, after a short
  pause; a failure once the response has started, or an HTTP error status, never is.
- The stall deadline applies to every read (the response head, each piece of the body),
  with ``trio.fail_after``, so a cancelled turn is never outlived by an httpx timeout.
- Leaving ``stream_chat`` (done, error or cancel) closes the response at once.
- httpx's exceptions stop here: callers see the ``ModelError`` subclasses only.

The API key, when there is one, is sent as ``Authorization: Bearer`` and nowhere else: it
is not in any message, log line or repr (httpx masks the header in its own repr).
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
from zcoder.agent.ollama_stream import close_response, describe, stall_text
from zcoder.agent.ollama_wire import error_text
from zcoder.agent.openai_stream import EventChunkStream
from zcoder.agent.openai_wire import decode_models, encode_chat_request, model_entries
from zcoder.agent.servers import GENERIC, kind_from_models, start_fix
from zcoder.errors import (
    MalformedStream,
    ModelError,
    ModelHTTPError,
    ServerUnavailable,
    StreamStalled,
)

__all__ = ["OpenAIClient"]

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


def _positive_int(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


class OpenAIClient:
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
        kind: str = GENERIC,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stall: StallLimits | None = None,
        connect_seconds: float = 10.0,
    ) -> None:
        if not connect_seconds > 0:
            raise ValueError("connect_seconds must be positive")
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.kind = kind
        self._stall = stall or StallLimits()
        headers = {"User-Agent": f"zcoder/{zcoder.__version__}"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(connect=connect_seconds, read=None, write=None, pool=None),
            headers=headers,
            trust_env=False,
            verify=not self.base_url.startswith("http://"),
        )

    def __repr__(self) -> str:
        return f"OpenAIClient({self.base_url!r}, kind={self.kind!r})"

    async def __aenter__(self) -> OpenAIClient:
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

    async def identify(self) -> list[ModelInfo]:
        """Learn ``kind`` from the server (when it gives itself away); the served models."""
        body = await self._json("GET", "/models")
        models = decode_models(body)
        kind = kind_from_models(body)
        if not kind and await self._answers(f"{self.root_url}/api/v0/models"):
            kind = "LM Studio"  # its /v1 says nothing of itself; its own API does
        self.kind = kind or self.kind
        return models

    async def context_length(self, model: str) -> int | None:
        """The context window the server runs ``model`` with, where it says so.

        llama.cpp: ``meta.n_ctx`` in ``/v1/models``, else ``GET /props``
        ``default_generation_settings.n_ctx`` (or ``n_ctx``; ``/props`` may be off);
        vLLM: ``max_model_len`` in ``/v1/models``; LM Studio: ``loaded_context_length`` of
        ``/api/v0/models/NAME``; Ollama: the ``context_length`` ``/api/ps`` reports for
        the loaded model (through ``/v1`` it runs with its default, not the model's
        maximum). Anything else, or an answer that is not usable: ``None``.
        """
        try:
            if self.kind == "llama.cpp":
                for entry in model_entries(await self._json("GET", "/models")):
                    if n_ctx := _positive_int((entry.get("meta") or {}).get("n_ctx")):
                        return n_ctx  # one model per server: whatever name was asked
                props = await self._json("GET", f"{self.root_url}/props")
                settings = props.get("default_generation_settings") or {}
                return _positive_int(settings.get("n_ctx")) or _positive_int(props.get("n_ctx"))
            if self.kind == "LM Studio":
                entry = await self._json("GET", f"{self.root_url}/api/v0/models/{model}")
                return _positive_int(entry.get("loaded_context_length"))
            if self.kind == "Ollama":
                return await self._ollama_context(model)
            for entry in model_entries(await self._json("GET", "/models")):
                if entry["id"] == model:
                    return _positive_int(entry.get("max_model_len"))
        except (ServerUnavailable, StreamStalled):
            raise
        except (ModelError, AttributeError):
            return None  # not reported, or not in a shape zcoder knows
        return None

    async def _ollama_context(self, model: str) -> int | None:
        body = await self._json("GET", f"{self.root_url}/api/ps")
        for entry in body.get("models") or []:
            if entry.get("name") == model or entry.get("model") == model:
                return _positive_int(entry.get("context_length"))
        return None

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _answers(self, url: str) -> bool:
        try:
            await self._json("GET", url)
        except (ServerUnavailable, StreamStalled):
            raise
        except ModelError:
            return False
        return True

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
        raise ModelHTTPError(response.status_code, text, kind=self.kind, model_missing=missing)

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
            f"cannot reach {self.kind} at {self.base_url} ({reason}); {start_fix(self.kind)}",
            reason=reason,
            kind=self.kind,
        )

    async def _read_all(self, response: httpx.Response, limit: int) -> bytes:
        """Up to ``limit`` bytes of a (small) body, then the response is closed."""
        parts: list[bytes] = []
        size = 0
        reader = EventChunkStream(response, self._stall)
        try:
            while size < limit and (data := await reader.read_raw()) is not None:
                parts.append(data)
                size += len(data)
        finally:
            await close_response(response, reader)
        return b"".join(parts)[:limit]
