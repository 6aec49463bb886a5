"""Reading one OpenAI-compatible streamed reply: server-sent events into ``ChatChunk`` values.

The byte reading, the stall deadline and the shielded close are ``ChunkStream``'s (the
Ollama reader's); only what a line means differs: here lines make SSE events, and the
events are assembled by ``ReplyAssembler``.
"""

from __future__ import annotations

from collections import deque

import httpx

from zcoder.agent.model import ChatChunk, StallLimits
from zcoder.agent.openai_sse import SSEEvents
from zcoder.agent.openai_wire import ReplyAssembler
from zcoder.agent.response_stream import ChunkStream
from zcoder.errors import IncompleteStream

__all__ = ["EventChunkStream"]


class EventChunkStream(ChunkStream):
    """The chat chunks of one SSE response; ends with the ``done`` chunk at ``[DONE]``.

    A body that ends after a ``finish_reason`` but without ``[DONE]`` is complete (some
    proxies drop the marker); one that ends before any finish reason raises
    ``IncompleteStream``, as a cut Ollama stream does.
    """

    def __init__(
        self, response: httpx.Response, stall: StallLimits, first_by: float | None = None
    ) -> None:
        super().__init__(response, stall, first_by)
        self._events = SSEEvents()
        self._reply = ReplyAssembler()
        self._ready: deque[ChatChunk] = deque()
        self._ended = False

    async def _next_chunk(self) -> ChatChunk:
        while not self._ready:
            if self._lines:
                for data in self._events.line(self._lines.popleft()):
                    self._ready.extend(self._reply.data(data))
            elif self._ended:
                # What arrived before the cut was passed on first, as Ollama's reader does.
                raise IncompleteStream("the model server ended the reply before it was complete")
            elif (raw := await self.read_raw()) is None:
                self._end_of_body()
            else:
                self._lines.extend(self._splitter.feed(raw))
        return self._ready.popleft()

    def _end_of_body(self) -> None:
        self._ended = True
        tail = self._splitter.tail()
        events = [*self._events.line(tail), *self._events.end()] if tail else self._events.end()
        for data in events:
            self._ready.extend(self._reply.data(data))
        if not self._reply.done and self._reply.finished:
            self._ready.extend(self._reply.finish())
