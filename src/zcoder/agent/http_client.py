"""What every model client does over HTTP, once: the connection pool, the one retry, the
stall deadlines on the response head, small bodies read whole, and httpx's exceptions
turned into zcoder's.

``OllamaClient`` and ``OpenAIClient`` differ only in their paths, their bodies and what an
error status means on their server; they subclass ``HttpModelClient`` and say that in
``_http_failure`` (what an unreachable server is told to do is its kind's:
``_unavailable_text``).

- A connection failure before any response byte is retried exactly once, after a short
  pause; a failure once the response has started, or an HTTP error status, never is.
- Deadlines are trio deadlines (``StallLimits``), never httpx's read timeout, which would
  outlive a cancelled turn's intent: a chat request's head shares ``first_token`` with its
  first chunk (both attempts of a retry together); every other wait gets
  ``between_tokens``.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import httpx
import trio

import zcoder
from zcoder.agent.json_fields import error_text
from zcoder.agent.model import StallLimits
from zcoder.agent.response_stream import ChunkStream, close_response, describe, stall_text
from zcoder.agent.servers import ServerKind
from zcoder.errors import MalformedStream, ModelHTTPError, ServerUnavailable, StreamStalled

__all__ = ["MAX_BODY", "MAX_ERROR_BODY", "HttpModelClient"]

# Failures that happen before the server said anything: the request was not answered.
_RETRYABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
_RETRY_PAUSE = 0.25
MAX_BODY = 1024 * 1024
MAX_ERROR_BODY = 64 * 1024


class HttpModelClient:
    """The HTTP half shared by the model clients (see the module docstring)."""

    _kind: ServerKind

    @property
    def kind(self) -> ServerKind:
        """The kind of server it speaks to, fixed when it is made: ``connect.choose_server``
        decides it, so every reader sees the same kind for the whole run."""
        return self._kind

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        stall: StallLimits | None = None,
        connect_seconds: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if not connect_seconds > 0:
            raise ValueError("connect_seconds must be positive")
        self.base_url = base_url.rstrip("/")
        self._stall = stall or StallLimits()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            # Reads are bounded by the stall deadlines in trio, not by httpx.
            timeout=httpx.Timeout(connect=connect_seconds, read=None, write=None, pool=None),
            headers={"User-Agent": f"zcoder/{zcoder.__version__}", **(headers or {})},
            # A proxy from the environment in front of a local model server is a trap.
            trust_env=False,
            # Plain http (the usual local URL) never does TLS, as redirects are not
            # followed: skip loading the CA bundle, which costs 0.1-0.7 s at start-up.
            verify=not self.base_url.startswith("http://"),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # -- what a subclass says about its server -------------------------------------------
    def _unavailable_text(self, reason: str) -> str:
        """The one line for a server that cannot be reached: its kind says how to start
        it."""
        return f"cannot reach {self.kind.name} at {self.base_url} ({reason}); {self.kind.start}"

    async def _http_failure(self, status: int, text: str, model: str) -> ModelHTTPError:
        """The error for an HTTP error status whose body said ``text``."""
        raise NotImplementedError

    # -- the shared half -------------------------------------------------------------------
    async def _json(self, method: str, path: str, body: Any = None, *, model: str = "") -> Any:
        response = await self._open(method, path, body, model=model)
        raw = await self._read_all(response, MAX_BODY)
        try:
            return json.loads(raw)
        except ValueError:
            raise MalformedStream(f"{method} {path}: the answer is not JSON") from None

    async def _open(
        self, method: str, path: str, body: Any, *, model: str, by: float | None = None
    ) -> httpx.Response:
        """Send with one retry; ``by`` is the deadline for the response head (trio's clock,
        default ``between_tokens`` from now). An error status raises ``_http_failure``."""
        request = self._http.build_request(method, path, json=body)
        first = by is not None
        by = by if by is not None else trio.current_time() + self._stall.between_tokens
        response = await self._send_with_retry(request, by, first)
        if response.status_code < 400:
            return response
        raw = await self._read_all(response, MAX_ERROR_BODY)
        raise await self._http_failure(response.status_code, error_text(raw), model)

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
        return ServerUnavailable(self._unavailable_text(reason), reason=reason)

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
