"""``WatchedClient``: a failure is read against zcoder's own server process (a stand-in
here; tests/realmodel/test_gguf_restart.py kills the real one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.agent.servers import LLAMA_CPP
from zcoder.errors import LocalServerError, LocalServerExited, MalformedStream, ServerUnavailable
from zcoder.localserver.watch import WatchedClient, exit_text


class _Server:
    name = "m.gguf"

    def __init__(self, status: int | None, restart_fails: bool = False) -> None:
        self.status = status
        self.respawned = 0
        self._restart_fails = restart_fails

    def wait_exit(self, seconds: float) -> int | None:
        return self.status

    def last_log_line(self) -> str:
        return "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200"

    def respawn(self) -> None:
        self.respawned += 1

    def ready_again(self) -> None:
        if self._restart_fails:
            raise LocalServerError("llama.cpp's server for m.gguf exited (exit status 1)")


class _Refused:
    kind = LLAMA_CPP

    def __init__(self, error: Exception) -> None:
        self.error = error

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        raise self.error
        yield  # pragma: no cover

    async def list_models(self) -> list[ModelInfo]:
        raise self.error

    async def context_length(self, model: str) -> int | None:
        raise self.error

    async def aclose(self) -> None:
        pass


def _client(server: _Server, error: Exception) -> WatchedClient:
    return WatchedClient(_Refused(error), server)


async def _chat(client: WatchedClient) -> None:
    async with client.stream_chat(ChatRequest(model="m", messages=[])):
        pass


def test_exit_text() -> None:
    assert (exit_text(1), exit_text(-9), exit_text(-200)) == (
        "exit status 1",
        "killed by SIGKILL",
        "killed by signal 200",
    )


async def test_a_failure_of_a_live_server_passes_as_it_is() -> None:
    refused = ServerUnavailable("cannot reach llama.cpp")
    client = _client(_Server(None), refused)
    with pytest.raises(ServerUnavailable) as info:
        await _chat(client)
    assert info.value is refused
    with pytest.raises(MalformedStream):  # not a sign of a dead server: never looked at
        await _client(_Server(0), MalformedStream("x")).list_models()


async def test_an_exited_server_is_said_started_again_once_then_how() -> None:
    server = _Server(-9)
    client = _client(server, ServerUnavailable("cannot reach llama.cpp"))
    with pytest.raises(LocalServerExited) as first:
        await _chat(client)
    assert str(first.value).startswith(
        "llama.cpp's server for m.gguf, which zcoder started, exited (killed by SIGKILL; its "
        "log ended: srv log_server_r: request: POST /v1/chat/completions 127.0.0.1 200); "
        "zcoder started it again in "
    )
    assert server.respawned == 1
    with pytest.raises(ServerUnavailable) as quiet:  # its failure is never shown: no restart
        await client.context_length("m")
    assert not isinstance(quiet.value, LocalServerExited)
    with pytest.raises(LocalServerExited) as second:
        await client.list_models()
    assert "exited again (killed by SIGKILL" in str(second.value)
    assert "quit, then run the `zcoder --resume` command" in str(second.value)
    assert server.respawned == 1


async def test_a_restart_that_fails_says_how() -> None:
    client = _client(_Server(1, restart_fails=True), ServerUnavailable("x"))
    with pytest.raises(LocalServerExited) as info:
        await client.list_models()
    assert "exited (exit status 1; its log ended:" in str(info.value)
    assert "and starting it again failed (llama.cpp's server for m.gguf exited" in str(info.value)


async def test_a_one_shot_run_does_not_start_it_again() -> None:
    server = _Server(-9)
    client = WatchedClient(_Refused(ServerUnavailable("x")), server, restart=False)
    with pytest.raises(LocalServerExited) as info:
        await _chat(client)
    assert str(info.value).endswith("): run zcoder again, which starts it")
    assert "exited (killed by SIGKILL" in str(info.value) and server.respawned == 0
