"""Reading one streamed model response body, for both clients: every read under the stall
deadline, a close that is shielded, bounded and leaves the connection reusable when the
reply was complete, and the one-line text of a transport failure. ``ChunkStream`` decodes
Ollama's NDJSON chat lines; the OpenAI client's ``EventChunkStream`` reads server-sent
events over the same reads.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque

import httpx
import trio

from zcoder.agent.model import ChatChunk, StallLimits
from zcoder.agent.ollama_wire import LineSplitter, decode_chat_line
from zcoder.errors import IncompleteStream, ModelError, StreamStalled

__all__ = ["ChunkStream", "close_response", "describe", "stall_text"]

_CLOSE_SECONDS = 2.0
_DRAIN_SECONDS = 1.0
_MAX_BUFFERED_PIECES = 64


def describe(exc: BaseException) -> str:
    """A short cause: the first OS error number found ("connection refused"), else the text.

    httpx wraps the socket error several layers deep (trio's connect gathers every attempt
    into an ExceptionGroup), and its own text repeats the address the caller already shows.
    """
    errno = _first_errno(exc, depth=0)
    if errno is not None:
        return os.strerror(errno).lower()
    return str(exc) or type(exc).__name__


def _first_errno(exc: BaseException | None, *, depth: int) -> int | None:
    if exc is None or depth > 8:
        return None
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_errno(inner, depth=depth + 1)
            if found is not None:
                return found
    return _first_errno(exc.__cause__ or exc.__context__, depth=depth + 1)


def stall_text(stall: StallLimits, *, first: bool) -> str:
    """Why a reply was given up, naming the setting that allows more time."""
    if first:
        return (
            f"the model server started no reply within {stall.first_token:g}s (loading the "
            "model and reading the prompt took longer; ZCODER_FIRST_TOKEN_TIMEOUT allows more)"
        )
    return (
        f"the model server sent nothing for {stall.between_tokens:g}s; gave up on the reply "
        "(ZCODER_STALL_TIMEOUT allows more)"
    )


class ChunkStream:
    """The chat chunks of one response; every read is under a stall deadline.

    Until the first chunk, reads share the absolute deadline ``first_by`` (trio's clock,
    set when the request was sent: a model load and prompt processing come first); after
    it, or always when ``first_by`` is None, each read gets ``stall.between_tokens``.
    """

    def __init__(
        self, response: httpx.Response, stall: StallLimits, first_by: float | None = None
    ) -> None:
        self._bytes = response.aiter_bytes()
        self._stall = stall
        self._first_by = first_by
        self._splitter = LineSplitter()
        self._lines: deque[bytes] = deque()
        self._finished = False
        self._done = False
        self._exhausted = False

    def __aiter__(self) -> ChunkStream:
        return self

    async def __anext__(self) -> ChatChunk:
        if self._finished:
            raise StopAsyncIteration
        try:
            chunk = await self._next_chunk()
        except BaseException:
            self._finished = True
            raise
        self._finished = self._done = chunk.done
        self._first_by = None
        return chunk

    async def _next_chunk(self) -> ChatChunk:
        while True:
            while self._lines:
                line = self._lines.popleft()
                if line.strip():
                    return decode_chat_line(line)
            data = await self.read_raw()
            if data is None:
                tail = self._splitter.tail()
                if tail.strip():
                    return decode_chat_line(tail)
                raise IncompleteStream("the model server ended the reply before it was complete")
            self._lines.extend(self._splitter.feed(data))

    async def read_raw(self) -> bytes | None:
        """The next piece of the body as it arrived, or ``None`` at its end."""
        first_by = self._first_by
        deadline = trio.current_time() + self._stall.between_tokens
        try:
            with trio.fail_at(first_by if first_by is not None else deadline):
                return await anext(self._bytes)
        except StopAsyncIteration:
            self._exhausted = True
            return None
        except trio.TooSlowError:
            self._exhausted = True
            raise StreamStalled(stall_text(self._stall, first=first_by is not None)) from None
        except httpx.HTTPError as exc:
            self._exhausted = True
            raise IncompleteStream(f"the connection broke mid-reply: {describe(exc)}") from None
        except BaseException:
            self._exhausted = True
            raise

    async def close(self, response: httpx.Response) -> None:
        """Close the response; called shielded and bounded."""
        self._finished = True
        if self._done and not self._exhausted:
            # The body ends right after the done line: reading that end lets httpx keep the
            # connection for the next turn.
            with trio.move_on_after(_DRAIN_SECONDS), contextlib.suppress(ModelError):
                while await self.read_raw() is not None:
                    pass
        await response.aclose()
        if not self._exhausted:
            # httpx reads through a chain of async generators; resuming them on the closed
            # connection (past what was buffered) ends them now, instead of trio finalizing
            # them at GC time with a ResourceWarning.
            with contextlib.suppress(Exception):
                for _ in range(_MAX_BUFFERED_PIECES):
                    await anext(self._bytes)


async def close_response(response: httpx.Response, reader: ChunkStream) -> None:
    # Shielded so that a cancelled turn still drops the connection; bounded so a stuck
    # close cannot hang the caller.
    with trio.move_on_after(_CLOSE_SECONDS, shield=True):
        await reader.close(response)
