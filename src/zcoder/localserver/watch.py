"""The model client of a ``--gguf`` run, watching the server zcoder started.

A request that fails because the connection is refused or broke mid-reply is read against
the child process: when it has exited, the failure says so (its exit status and llama.cpp's
last log line) instead of asking whether ``llama-server`` runs, and the server is started
again once, on the same port, so the next prompt is answered. Should it exit again, the
line says how to start it afresh. Any other failure passes as it is. Only the requests whose
failure the user sees restart it (a chat, a listing of models): asking for the context
window fails quietly and would hide the news.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import trio

from zcoder.agent.model import ChatChunk, ChatRequest, ClientWrapper, ModelClient, ModelInfo
from zcoder.errors import IncompleteStream, LocalServerError, LocalServerExited, ServerUnavailable
from zcoder.text.flat import one_line

__all__ = ["Watched", "WatchedClient", "exit_text"]

# How long a dropped connection may come before the exit it was caused by is seen.
_EXIT_SECONDS = 1.0
_DIED = (ServerUnavailable, IncompleteStream)


class Watched(Protocol):
    """The server process (``process.ChildServer``), as far as the client needs it."""

    name: str

    def wait_exit(self, seconds: float) -> int | None: ...
    def last_log_line(self) -> str: ...
    def respawn(self) -> None: ...
    def ready_again(self) -> None: ...


def exit_text(status: int) -> str:
    """``exit status 1``, ``killed by SIGKILL``: how a child's ``returncode`` reads."""
    if status >= 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


class WatchedClient(ClientWrapper):
    """``inner``, the client of ``server``: its failures, once the server is found
    exited, become one ``LocalServerExited`` line, after one restart at most (none when
    ``restart`` is false: a one-shot run ends with its one turn anyway)."""

    def __init__(self, inner: ModelClient, server: Watched, *, restart: bool = True) -> None:
        super().__init__(inner)
        self._server = server
        self._restart = restart
        self._restarted = False
        self._lock = trio.Lock()  # requests that failed together restart it once

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        await self._after_restart()
        try:
            async with self._inner.stream_chat(request) as chunks:
                yield chunks
        except _DIED:
            exited = await self._exited()
            if exited is None:
                raise
            raise exited from None

    async def list_models(self) -> list[ModelInfo]:
        await self._after_restart()
        try:
            return await self._inner.list_models()
        except _DIED:
            exited = await self._exited()
            if exited is None:
                raise
            raise exited from None

    async def _after_restart(self) -> None:
        """Wait while another request restarts the server (one sent now would find it
        loading: HTTP 503)."""
        async with self._lock:
            pass

    async def _exited(self) -> LocalServerExited | None:
        """What to say when the server has exited (started again once), else ``None``."""
        async with self._lock:
            server = self._server
            status = await trio.to_thread.run_sync(server.wait_exit, _EXIT_SECONDS)
            if status is None:
                return None
            last = one_line(server.last_log_line(), 160)
            how = exit_text(status) + (f"; its log ended: {last}" if last else "")
            what = f"llama.cpp's server for {server.name}, which zcoder started, exited"
            if not self._restart:
                return LocalServerExited(f"{what} ({how}): run zcoder again, which starts it")
            if self._restarted:
                return LocalServerExited(
                    f"{what} again ({how}); zcoder starts it again only once a run: quit, "
                    "then run the `zcoder --resume` command zcoder prints (it starts the "
                    "server afresh)"
                )
            self._restarted = True
            started = trio.current_time()
            try:
                server.respawn()  # here, on the run's thread: the child lives as long
                # Not cut short by a caller's deadline or Escape: a restart half done
                # would leave a request to meet a server still loading (HTTP 503).
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(server.ready_again)
            except (LocalServerError, OSError) as exc:
                return LocalServerExited(
                    f"{what} ({how}), and starting it again failed ({exc}): quit, then run "
                    "the `zcoder --resume` command zcoder prints"
                )
            seconds = trio.current_time() - started
            return LocalServerExited(
                f"{what} ({how}); zcoder started it again in {seconds:.1f}s: send the prompt again"
            )
