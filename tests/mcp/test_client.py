"""MCP servers end to end: a real server built with the SDK (``server_script.py``) run by
``McpHub``, its tools called directly and through the agent loop with approvals. A test that
needs a fresh server (stdio specifics, a crash, a server that never answers) starts its own
stdio one; the others call the session's shared HTTP server (``conftest.py``), as the
client's calls do not depend on the transport."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import attrs
import trio

from tests.agent.doubles import (
    FakeApprover,
    FakeSession,
    FakeStore,
    RecordingSink,
    ScriptedClient,
    call,
    make_config,
    text,
    tools,
)
from tests.mcp.http_server import GC_WARNING, SCRIPT
from zcoder.agent.agent import Agent, RelaySender, TurnOutcome, TurnRequest
from zcoder.live import ToolUpdate
from zcoder.mcp.client import McpHub, list_server_tools
from zcoder.mcp.config import ServerConfig
from zcoder.tools.base import ToolContext
from zcoder.tools.registry import CheckedCall, Toolbox, core_tools

DEMO = ServerConfig("demo", command=sys.executable, args=(SCRIPT,), env={"DEMO_VAR": "hi"})
__all__ = ["DEMO", "SCRIPT", "run", "running"]

SENDER = RelaySender("42110-777", 42110, "user-profiles", "/work/app/user-profiles", True)


@attrs.define
class Running:
    hub: McpHub
    notices: list[str]
    changed: trio.Event

    async def ready(self) -> None:
        with trio.fail_after(20):
            while not self.hub.tools() and self.hub.servers[0].state == "starting":
                await self.changed.wait()
                self.changed = trio.Event()

    async def until(self, state: str) -> None:
        with trio.fail_after(15):
            while self.hub.servers[0].state != state:
                await self.changed.wait()
                self.changed = trio.Event()

    def box(self) -> Toolbox:
        return Toolbox([*core_tools(), *self.hub.tools()])


def web(url: str) -> ServerConfig:
    """The shared HTTP server under the stdio server's name, so its tools are named alike."""
    return ServerConfig("demo", url=url)


@asynccontextmanager
async def running(tmp_path: Path, config: ServerConfig = DEMO) -> AsyncIterator[Running]:
    notices: list[str] = []
    state = Running(cast(Any, None), notices, trio.Event())

    def changed() -> None:
        state.changed.set()

    def notice(line: str) -> None:
        notices.append(line)
        state.changed.set()

    state.hub = McpHub([config], cwd=tmp_path, notice=notice, on_change=changed)
    async with trio.open_nursery() as nursery:
        await nursery.start(state.hub.run)
        yield state
        nursery.cancel_scope.cancel()


async def run(box: Toolbox, tool: str, tmp_path: Path, **args: Any) -> Any:
    checked = box.check(tool, args)
    assert isinstance(checked, CheckedCall), checked
    return await box.run(checked, ToolContext(workspace=tmp_path))


async def test_tools_are_listed_and_called(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.ready()
        box = r.box()
        names = [n for n in box.names() if n.startswith("mcp__")]
        assert names == [f"mcp__demo__{t}" for t in ("add", "fail", "slow", "huge", "crash", "env")]
        spec = next(s for s in box.specs() if s.name == "mcp__demo__add")
        assert spec.parameters["required"] == ["a", "b"]
        assert box.asks("mcp__demo__add") == "always"
        added = await run(box, "mcp__demo__add", tmp_path, a=2, b=3)
        assert added.text == "5" and added.output == "5"  # previewed under its card
        failed = await run(box, "mcp__demo__fail", tmp_path, reason="nope")
        assert not failed.ok and failed.text.startswith("Error: ")
        huge = await run(box, "mcp__demo__huge", tmp_path)
        assert len(huge.text) <= ToolContext(tmp_path).output_cap and "omitted" in huge.text
        assert len(huge.output) <= 4000
        assert (await run(box, "mcp__demo__env", tmp_path, name="DEMO_VAR")).text == "hi"
        assert (
            "invalid arguments"
            in (await box.call("mcp__demo__add", {"a": 1}, ToolContext(tmp_path))).text
        )
        assert r.hub.lines()[0].startswith("demo: ready")
    assert r.notices == [] and r.hub.servers[0].state == "stopped"


@GC_WARNING
async def test_a_slow_call_is_cancelled_and_the_server_goes_on(
    tmp_path: Path, http_url: str
) -> None:
    async with running(tmp_path, web(http_url)) as r:
        await r.ready()
        box = r.box()
        start = time.monotonic()
        with trio.move_on_after(0.5) as scope:
            await run(box, "mcp__demo__slow", tmp_path, seconds=60)
        assert scope.cancelled_caught and time.monotonic() - start < 5
        assert (await run(box, "mcp__demo__add", tmp_path, a=1, b=1)).text == "2"


@GC_WARNING
async def test_a_call_past_the_timeout_is_a_failed_result_and_the_server_goes_on(
    tmp_path: Path, http_url: str
) -> None:
    async with running(tmp_path, attrs.evolve(web(http_url), timeout=0.5)) as r:
        await r.ready()
        box = r.box()
        start = time.monotonic()
        result = await run(box, "mcp__demo__slow", tmp_path, seconds=60)
        assert time.monotonic() - start < 5
        assert not result.ok
        assert result.text == "Error: MCP server demo did not answer mcp__demo__slow within 0.5 s"
        assert (await run(box, "mcp__demo__slow", tmp_path, seconds=0)).text == "slept"
        assert (await run(box, "mcp__demo__add", tmp_path, a=1, b=1)).text == "2"
        assert r.hub.servers[0].state == "ready" and r.notices == []


async def test_a_crash_mid_call_is_a_failed_result_and_the_tools_go(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.ready()
        box = r.box()
        result = await run(box, "mcp__demo__crash", tmp_path)
        assert not result.ok and "demo" in result.text
        await r.until("failed")
        assert r.hub.tools() == []
        assert r.notices == ["MCP server demo failed: the server exited"]
        again = await run(box, "mcp__demo__add", tmp_path, a=1, b=1)
        assert not again.ok and "not running" in again.text


async def test_a_server_that_never_answers_initialize_is_one_line(tmp_path: Path) -> None:
    mute = attrs.evolve(DEMO, args=(SCRIPT, "mute"), startup_timeout=1.0)
    start = time.monotonic()
    async with running(tmp_path, mute) as r:
        await r.until("failed")
    assert r.notices == ["MCP server demo failed: no answer to initialize within 1 s"]
    assert r.hub.tools() == [] and time.monotonic() - start < 10


async def test_a_missing_command_is_one_line(tmp_path: Path) -> None:
    found, problem = await list_server_tools(
        attrs.evolve(DEMO, command=str(tmp_path / "nope"), args=()), tmp_path
    )
    assert found == [] and problem.startswith("cannot start: No such file or directory")


def _agent(
    tmp_path: Path, box: Toolbox, replies: list[Any], *answers: Any
) -> tuple[Agent, FakeApprover, FakeSession, RecordingSink]:
    approver = FakeApprover(*answers)
    session = FakeSession(workspace=tmp_path)
    sink = RecordingSink()
    agent = Agent(
        config=make_config(tmp_path),
        client=ScriptedClient(replies),
        toolbox=box,
        approver=approver,
        store=cast(Any, FakeStore()),
        session=cast(Any, session),
        sink=sink,
    )
    return agent, approver, session, sink


@GC_WARNING
async def test_the_agent_asks_then_calls_or_respects_a_denial(
    tmp_path: Path, http_url: str
) -> None:
    async with running(tmp_path, web(http_url)) as r:
        await r.ready()
        replies = [tools(call("mcp__demo__add", a=2, b=3)), text("five")]
        agent, approver, session, _ = _agent(tmp_path, r.box(), replies, "y")
        await agent.run_turn(TurnRequest("user", "add"))
        asked = approver.asked[0]
        assert (asked.kind, asked.target, asked.choices) == ("tool", "mcp__demo__add", ("y", "n"))
        assert '"a": 2' in asked.text
        assert session.history[2].content == "5"
        agent, approver, session, _ = _agent(tmp_path, r.box(), replies, "n")
        await agent.run_turn(TurnRequest("user", "add"))
        assert session.history[2].content == "user denied the call of mcp__demo__add"


@GC_WARNING
async def test_allow_skips_the_question_in_local_turns_only(tmp_path: Path, http_url: str) -> None:
    async with running(tmp_path, attrs.evolve(web(http_url), allow=True)) as r:
        await r.ready()
        replies = [tools(call("mcp__demo__add", a=2, b=3)), text("five")]
        agent, approver, session, _ = _agent(tmp_path, r.box(), replies)
        await agent.run_turn(TurnRequest("user", "add"))
        assert approver.asked == [] and session.history[2].content == "5"
        agent, approver, session, _ = _agent(tmp_path, r.box(), list(replies), "y")
        await agent.run_turn(TurnRequest("relay", "add", SENDER))
        assert [(q.kind, q.origin) for q in approver.asked] == [("tool", "relay")]
        assert session.history[-2].content == "5"


@GC_WARNING
async def test_escape_cancels_a_slow_call_in_a_turn(tmp_path: Path, http_url: str) -> None:
    async with running(tmp_path, attrs.evolve(web(http_url), allow=True)) as r:
        await r.ready()
        replies = [tools(call("mcp__demo__slow", seconds=60))]
        agent, _, _, sink = _agent(tmp_path, r.box(), replies)
        seen = sink.watch(lambda e: isinstance(e, ToolUpdate) and e.state == "running")

        async def escape() -> None:
            await seen.wait()
            assert agent.cancel_turn()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(escape)
            with trio.fail_after(10):
                outcome = await agent.run_turn(TurnRequest("user", "wait"))
        assert outcome == TurnOutcome("cancelled")
        assert (await run(r.box(), "mcp__demo__add", tmp_path, a=1, b=2)).text == "3"
