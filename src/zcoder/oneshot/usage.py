"""Token usage of a one-shot run, as the model server counted it.

``MeteredClient`` wraps the run's ``ModelClient`` and hands the last chunk of every reply
(the one with the counts) to a callback; ``Usage`` adds them up. A server that does not
report a count (an OpenAI-compatible server without ``stream_options.include_usage``)
leaves it unknown: ``None``, never a guess.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs

from zcoder.agent.model import ChatChunk, ChatRequest, ClientWrapper, ModelClient

__all__ = ["MeteredClient", "Usage"]


def _known(count: int) -> int | None:
    return count if count > 0 else None


def _add(total: int | None, count: int | None) -> int | None:
    if count is None:
        return total
    return count if total is None else total + count


@attrs.define
class Usage:
    """What the model requests of a run cost: their number, and the prompt and output
    tokens of those whose counts the server reported (``None`` while none did)."""

    requests: int = 0
    prompt_tokens: int | None = None
    output_tokens: int | None = None

    def add(self, chunk: ChatChunk) -> None:
        """Count one finished reply (its ``done`` chunk)."""
        self.requests += 1
        self.prompt_tokens = _add(self.prompt_tokens, _known(chunk.prompt_eval_count))
        self.output_tokens = _add(self.output_tokens, _known(chunk.eval_count))

    def record(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
        }


class _Counted:
    """The chunks of one reply, passed on unchanged; the ``done`` one is also reported."""

    def __init__(self, chunks: AsyncIterator[ChatChunk], on_done: Callable[[ChatChunk], None]):
        self._chunks = chunks
        self._on_done = on_done
        self.finished = False  # its ``done`` chunk came

    def __aiter__(self) -> _Counted:
        return self

    async def __anext__(self) -> ChatChunk:
        chunk = await self._chunks.__anext__()
        if chunk.done:
            self.finished = True
            self._on_done(chunk)
        return chunk


class MeteredClient(ClientWrapper):
    """A ``ModelClient`` that reports every reply (compaction requests too): its ``done``
    chunk, or, for a reply cut off before it (Escape, the loop guard), a ``done`` chunk
    with no counts: the server served the request, how much of it is not known."""

    def __init__(self, inner: ModelClient, on_done: Callable[[ChatChunk], None]) -> None:
        super().__init__(inner)
        self._on_done = on_done

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        async with self._inner.stream_chat(request) as chunks:
            counted = _Counted(chunks, self._on_done)
            try:
                yield counted
            finally:
                if not counted.finished:
                    self._on_done(ChatChunk(done=True))
