"""The model-client interface the turn loop talks to.

Ollama's native API is one implementation (``agent/ollama.py``), the OpenAI-compatible
API that llama.cpp, LM Studio, vLLM and Ollama's ``/v1`` serve the other
(``agent/openai.py``); the loop sees only this interface.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from zcoder.agent.servers import ServerKind
from zcoder.conversation import Message, ToolCall

if TYPE_CHECKING:
    from zcoder.config import Config

__all__ = ["ChatChunk", "ChatRequest", "ClientWrapper", "ModelClient", "ModelInfo", "StallLimits"]

# Prompt processing (and a model load) happen before the first token and can take minutes
# on a CPU; once tokens flow, a long silence means the server is stuck.
DEFAULT_FIRST_TOKEN_SECONDS = 300.0
DEFAULT_STALL_SECONDS = 60.0


@attrs.frozen
class ChatRequest:
    """Everything one model call needs; ``messages`` starts with the one system message.

    ``num_ctx`` is the context window zcoder decided on (Ollama's ``options.num_ctx``),
    ``num_predict`` the output cap of this one model step (Ollama ``options.num_predict``,
    OpenAI ``max_tokens``), ``temperature`` None for the server's default.
    """

    model: str
    messages: Sequence[Message]
    tools: Sequence[Mapping[str, Any]] = ()
    think: bool = True
    num_ctx: int | None = None
    num_predict: int | None = None
    temperature: float | None = None


@attrs.frozen
class ChatChunk:
    """One streamed piece of a reply.

    Deltas (``content``, ``thinking``) are to be concatenated; ``tool_calls`` arrive whole.
    The last chunk has ``done`` set, with ``done_reason`` and the token counts.
    """

    content: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    done: bool = False
    done_reason: str = ""
    prompt_eval_count: int = 0
    eval_count: int = 0
    eval_duration_ns: int = 0


@attrs.frozen
class ModelInfo:
    """One installed model, as listed by the server."""

    name: str
    size: int = 0
    parameter_size: str = ""
    quantization_level: str = ""


@attrs.frozen
class StallLimits:
    """How long a client waits for a reply before giving up (``StreamStalled``).

    ``first_token`` bounds the wait from sending a chat request to its first streamed piece
    (covering a model load and prompt processing, retries included); ``between_tokens``
    bounds every later silence, and every wait of the small JSON requests. Every client
    takes one of these (``stall=``), so all backends give up alike.
    """

    first_token: float = DEFAULT_FIRST_TOKEN_SECONDS
    between_tokens: float = DEFAULT_STALL_SECONDS

    def __attrs_post_init__(self) -> None:
        if not (self.first_token > 0 and self.between_tokens > 0):
            raise ValueError("stall limits must be positive")

    @classmethod
    def of(cls, config: Config) -> StallLimits:
        """The limits configured (``ZCODER_FIRST_TOKEN_TIMEOUT``, ``ZCODER_STALL_TIMEOUT``)."""
        return cls(config.first_token_timeout, config.stall_timeout)


class ModelClient(Protocol):
    """A chat model server.

    ``stream_chat`` is an async context manager yielding the chunks of one reply; leaving it
    early (cancel, error) closes the underlying stream. Failures raise ``ModelError``
    subclasses; a stream that ends without a ``done`` chunk raises ``IncompleteStream``.

    ``kind`` is the kind of server it speaks to (``agent/servers.py``): its name in
    messages, and what differs between kinds. ``context_length`` is the server's real context window
    for ``model``, None when the server does not say; it raises ``ModelError`` subclasses
    only for transport failures, never for "not reported".
    """

    @property
    def kind(self) -> ServerKind: ...

    async def context_length(self, model: str) -> int | None: ...

    def stream_chat(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[ChatChunk]]: ...

    async def list_models(self) -> list[ModelInfo]: ...

    async def aclose(self) -> None: ...


class ClientWrapper:
    """A ``ModelClient`` that passes everything to ``inner``: the base of the wrappers that
    watch one thing (a subclass overrides ``stream_chat``), so each says only what it adds."""

    def __init__(self, inner: ModelClient) -> None:
        self._inner = inner

    @property
    def kind(self) -> ServerKind:
        return self._inner.kind

    async def context_length(self, model: str) -> int | None:
        return await self._inner.context_length(model)

    def stream_chat(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[ChatChunk]]:
        return self._inner.stream_chat(request)

    async def list_models(self) -> list[ModelInfo]:
        return await self._inner.list_models()

    async def aclose(self) -> None:
        await self._inner.aclose()
