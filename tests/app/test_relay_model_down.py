"""A relayed message whose turn never reached the model is not consumed (issue 7, item 16).

Two real relay services in one Trio run; the receiver talks to the real fake Ollama over
HTTP, which is down (nothing listens on its port) or lacks the model, then comes up.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.agent.doubles import RecordingSink, make_config
from tests.app.test_relay_app import Instance, start
from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.model import ModelClient, StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.app.backend import AgentBackend
from zcoder.approval.questions import Answer, ApprovalRequest
from zcoder.config import RelaySettings
from zcoder.session.store import SessionStore

MODEL = "qwen3-coder:latest"


@attrs.define
class Receiver:
    backend: AgentBackend
    sink: RecordingSink
    inbox: Path

    @property
    def id(self) -> str:
        service = self.backend.relay.service
        return service.status().instance_id if service is not None else ""

    def system_lines(self) -> list[str]:
        return [e.text for e in self.sink.entries() if e.role == "system"]


class _NoApprover:
    async def ask(self, request: ApprovalRequest) -> Answer:
        raise AssertionError(f"nothing should be asked: {request}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def receiver(nursery: trio.Nursery, root: Path, url: str) -> AsyncIterator[Receiver]:
    async with OllamaClient(url, stall=StallLimits(5, 5), connect_seconds=2) as client:
        yield await receiver_on(nursery, root, url, client)


async def receiver_on(nursery: trio.Nursery, root: Path, url: str, client: ModelClient) -> Receiver:
    """A receiver (workspace ``beta``) over ``client``, its relay started in ``nursery``."""
    workspace, runtime = root / "beta", root / "rt-beta"
    workspace.mkdir()
    runtime.mkdir(mode=0o700)
    config = make_config(workspace, model=MODEL, host=url, relay=RelaySettings(dir=root / "agents"))
    store = SessionStore(config.home, workspace, "coding")
    sink = RecordingSink()
    backend = AgentBackend(
        config, store, store.create(MODEL), client, runtime, approver=_NoApprover(), sink=sink
    )
    assert await backend.start_relay(nursery) == ""
    return Receiver(backend, sink, runtime / "relay" / "inbox")


def records(request: dict[str, Any]) -> list[str]:
    """The relay records among a chat request's user messages."""
    user = [m["content"] for m in request.get("messages", []) if m["role"] == "user"]
    return [c for c in user if c.startswith("<agent_relay>")]


def relay_requests(fake: FakeOllama) -> list[dict[str, Any]]:
    return [r for r in fake.requests if records(r)]


async def sender(nursery: trio.Nursery, root: Path) -> Instance:
    return await start(nursery, root, "alpha")


async def send(a: Instance, b: Receiver, message: str) -> str:
    peer = next(p for p in await a.backend.sends.discover() if p.manifest.instance_id == b.id)
    return (await a.backend.sends.deliver(peer, message)).status


async def test_a_message_waits_while_the_server_is_down_and_runs_when_it_is_up(
    short_tmp: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with trio.open_nursery() as nursery:
        a = await sender(nursery, short_tmp)
        async with receiver(nursery, short_tmp, url) as b:
            assert await send(a, b, "rename users.name") == "accepted"
            assert await b.backend.runner.run_relay_turn() is True
            # Not consumed: first in the queue again, shown as waiting for the model.
            assert len(os.listdir(b.inbox)) == 1
            assert b.backend.inbox.status() == ("on", 1)
            assert b.backend.inbox.waits_for_model() and not b.backend.runner.relay_runnable()
            assert [m.role for m in b.backend.agent.session.history] == []
            errors = [e.text for e in b.sink.entries() if e.role == "error"]
            assert len(errors) == 1 and "Ollama is not reachable" in errors[0]
            assert b.system_lines()[-1] == (
                f"The relayed message from alpha (pid {os.getpid()}) did not reach the model: "
                "it stays first in the queue and runs when the model answers again."
            )
            # A sender sees it before it sends (zcoder's model_state in the pong).
            (peer,) = [p for p in await a.backend.sends.discover() if p.manifest.pid]
            assert peer.model == "unavailable"
            assert any("model unavailable" in line for line in await a.backend.list_agents())
            assert await send(a, b, "second") == "accepted"
            assert await b.backend.runner.check_model() != ""  # still down: still waiting
            assert b.backend.inbox.waits_for_model()
            b.backend.runner.sync_relay()  # what the worker does once woken: a query reads
            assert [u.task for u in b.backend.inbox.unrun()] == ["rename users.name", "second"]

            with FakeOllama({"models": [MODEL]}, port=port) as fake:
                assert await b.backend.runner.check_model() == ""
                (peer,) = await a.backend.sends.discover()
                assert peer.model == "available"
                assert b.backend.runner.relay_runnable() and not b.backend.inbox.waits_for_model()
                assert await b.backend.runner.run_relay_turn() is True
                (request,) = relay_requests(fake)
                assert "\nrename users.name\n" in request["messages"][-1]["content"]
                # The failed attempt left no copy of the task in the history.
                assert len(records(request)) == 1
                assert b.backend.inbox.status() == ("on", 1)
                assert [u.task for u in b.backend.inbox.unrun()] == ["second"]
            nursery.cancel_scope.cancel()


async def test_a_missing_model_holds_the_message_until_a_local_turn_reaches_the_model(
    short_tmp: Path,
) -> None:
    with FakeOllama({"models": ["other:latest"]}) as fake:
        async with trio.open_nursery() as nursery:
            a = await sender(nursery, short_tmp)
            async with receiver(nursery, short_tmp, fake.url) as b:
                assert await send(a, b, "the task") == "accepted"
                assert await b.backend.runner.run_relay_turn() is True
                assert fake.wait_for_outcomes(1) == ["model_not_found"]
                assert b.backend.inbox.waits_for_model()
                assert b.backend.inbox.status() == ("on", 1)
                fake.set_script({"models": [MODEL], "responses": [{"chunks": [{"content": "ok"}]}]})
                assert await b.backend.runner.run_turn("hello") == "answered"
                assert b.backend.runner.relay_runnable()
                assert await b.backend.runner.run_relay_turn() is True
                refused, local, relayed = fake.requests
                assert fake.wait_for_outcomes(3) == ["model_not_found", "complete", "complete"]
                assert len(records(refused)) == 1 and records(local) == []  # not kept
                assert len(records(relayed)) == 1
                assert b.backend.inbox.status() == ("on", 0)
                nursery.cancel_scope.cancel()


async def test_a_turn_that_reached_the_model_is_consumed_even_if_it_failed(
    short_tmp: Path,
) -> None:
    broken = {"chunks": [{"content": "half"}], "error_line_after": 1, "error": "oom"}
    with FakeOllama({"models": [MODEL], "responses": [broken]}) as fake:
        async with trio.open_nursery() as nursery:
            a = await sender(nursery, short_tmp)
            async with receiver(nursery, short_tmp, fake.url) as b:
                assert await send(a, b, "the task") == "accepted"
                assert await b.backend.runner.run_relay_turn() is True
                assert fake.wait_for_outcomes(1) == ["error_line"]
                # At most once: the model may have acted on it, so it never runs again.
                assert b.backend.inbox.status() == ("on", 0) and os.listdir(b.inbox) == []
                assert not b.backend.inbox.waits_for_model()
                assert b.backend.inbox.unrun() == []
                nursery.cancel_scope.cancel()
