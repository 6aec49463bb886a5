"""The model-client interface the turn loop talks to.

Ollama's native API is one implementation (``agent/ollama.py``), the OpenAI-compatible
API that llama.cpp, LM Studio, vLLM and Ollama's ``/v1`` serve the other
(``agent/openai.py``); the loop sees only this interface.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import attrs

from zcoder.conversation import Message, ToolCall

__all__ = ["ChatChunk", "ChatRequest", "ModelClient", "ModelInfo"]


@attrs.frozen
class ChatRequest:
    """Everything one model call needs; ``messages`` starts with the one system message."""

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


class ModelClient(Protocol):
    """A chat model server.

    ``stream_chat`` is an async context manager yielding the chunks of one reply; leaving it
    early (cancel, error) closes the underlying stream. Failures raise ``ModelError``
    subclasses; a stream that ends without a ``done`` chunk raises ``IncompleteStream``.
    """

    kind: str  # the server kind in use, for messages: "Ollama", "llama.cpp", "LM Studio",
    # "vLLM" or "OpenAI-compatible server"

    def stream_chat(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[ChatChunk]]: ...

    async def list_models(self) -> list[ModelInfo]: ...

    async def context_length(self, model: str) -> int | None:
        """The server's real context window for ``model``; ``None`` when it does not say.
        Raises ``ModelError`` subclasses only for transport failures."""
        ...

    async def aclose(self) -> None: ...
