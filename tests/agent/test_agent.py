"""The agent with its real collaborators: the Ollama client against the fake server, the
real tools (files, processes) and the real session store."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.agent.doubles import FakeApprover, RecordingSink, make_config
from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.agent import Agent, RelaySender, TurnOutcome, TurnRequest
from zcoder.agent.loop import STOP_MARKER
from zcoder.agent.model import ChatRequest, StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.agent.stop_note import STOP_NOTE
from zcoder.approval.questions import Answer
from zcoder.conversation import Message
from zcoder.errors import ModelHTTPError, SessionNotFound
from zcoder.live import LiveEvent, TextDelta, ToolUpdate
from zcoder.session.store import Session, SessionStore
from zcoder.tools.registry import Toolbox, core_tools

MODEL = "qwen3-coder:latest"


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"chunks": [{"tool_calls": [{"name": name, "arguments": arguments}]}]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    return ws


class Stack:
    def __init__(self, fake: FakeOllama, workspace: Path, *answers: Answer) -> None:
        self.config = make_config(workspace, model=MODEL, host=fake.url)
        self.client = OllamaClient(fake.url, stall=StallLimits(5, 5))
        self.store = SessionStore(self.config.home, workspace, "coding")
        self.session: Session = self.store.create(MODEL)
        self.sink = RecordingSink()
        self.approver = FakeApprover(*answers)
        self.agent = Agent(
            config=self.config,
            client=self.client,
            toolbox=Toolbox(core_tools()),
            approver=self.approver,
            store=self.store,
            session=self.session,
            sink=self.sink,
        )

    def reopen(self) -> Session:
        self.store.release(self.session)
        return self.store.open(self.session.id)


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama({"models": [MODEL]}) as server:
        yield server


OpenStack = Callable[..., Stack]


@pytest.fixture
async def open_stack(fake: FakeOllama, workspace: Path) -> AsyncIterator[OpenStack]:
    """Stacks over ``fake`` whose HTTP clients are closed when the test ends."""
    made: list[Stack] = []

    def open_one(*answers: Answer) -> Stack:
        made.append(Stack(fake, workspace, *answers))
        return made[-1]

    yield open_one
    for stack in made:
        await stack.client.aclose()


async def test_real_tools_edit_and_command(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script(
        {
            "models": [MODEL],
            "responses": [
                _tool("read_file", path="a.py"),
                _tool("replace_text", path="a.py", old_text="x = 1", new_text="x = 2"),
                _tool("run_command", command="cat a.py"),
                {"chunks": [{"content": "Done: "}, {"content": "x = 2."}]},
            ],
        }
    )
    stack = open_stack("y")
    outcome = await stack.agent.run_turn(TurnRequest("user", "set x to 2"))
    assert outcome == TurnOutcome("answered", text="Done: x = 2.")
    assert (workspace / "a.py").read_text() == "x = 2\n"
    tool_texts = [m.content for m in stack.session.history if m.role == "tool"]
    assert "x = 1" in tool_texts[0]
    assert tool_texts[2].startswith("Exit code: 0") and "x = 2" in tool_texts[2]
    # the server saw exactly one system message, then the growing history
    bodies = fake.requests
    assert [len(b["messages"]) for b in bodies] == [2, 4, 6, 8]
    assert bodies[3]["messages"][-1]["role"] == "tool"
    assert bodies[0]["messages"][0]["role"] == "system"
    diffs = [u.diff for u in stack.sink.of(ToolUpdate) if u.name == "replace_text" and u.diff]
    assert diffs and "+x = 2" in diffs[0]
    saved = stack.reopen()
    assert saved.history == stack.session.history
    assert saved.events == stack.session.events
    assert saved.user_requests == ["set x to 2"]


def _pid_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_cancel_mid_command_kills_the_process_group(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script(
        {"models": [MODEL], "responses": [_tool("run_command", command="echo $$ > pg; sleep 30")]}
    )
    stack = open_stack("y")

    async def cancel_when_started() -> None:
        await stack.sink.watch(_running).wait()
        for _ in range(500):
            if (workspace / "pg").exists() and (workspace / "pg").read_text().strip():
                break
            await trio.sleep(0.01)
        assert stack.agent.cancel_turn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_when_started)
        outcome = await stack.agent.run_turn(TurnRequest("user", "sleep"))
    assert outcome.status == "cancelled"
    pgid = int((workspace / "pg").read_text())
    for _ in range(200):
        if not _pid_alive(pgid):
            break
        await trio.sleep(0.01)
    assert not _pid_alive(pgid)
    assert [m.content for m in stack.session.history[-2:]] == [
        "interrupted because the user cancelled",
        STOP_MARKER,
    ]
    assert stack.reopen().history == stack.session.history


async def _escape_at_first_text(stack: Stack, prompt: str) -> TurnOutcome:
    """Run a turn and press Escape (cancel it) as soon as its first text streams."""

    async def cancel_on_text() -> None:
        await stack.sink.watch(lambda e: isinstance(e, TextDelta)).wait()
        stack.agent.cancel_turn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel_on_text)
        return await stack.agent.run_turn(TurnRequest("user", prompt))


def _running(event: LiveEvent) -> bool:
    return isinstance(event, ToolUpdate) and event.state == "running"


async def test_cancel_mid_stream_closes_the_http_stream(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script(
        {"models": [MODEL], "responses": [{"chunks": [{"content": "par"}], "stall_after": 1}]}
    )
    stack = open_stack()
    outcome = await _escape_at_first_text(stack, "q")
    assert outcome.status == "cancelled"
    assert await trio.to_thread.run_sync(fake.wait_for_outcomes, 1) == ["client_disconnected"]
    assert stack.session.history == [
        Message(role="user", content="q"),
        Message(role="assistant", content=STOP_MARKER),
    ]


async def test_after_escape_the_server_sees_a_user_note_not_the_marker(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    # The model must not find the stop as its own words (a small model then answers every
    # later task with the marker): it reads as a note on the user's side, in the stopped
    # prompt's message, and the partial reply is nowhere.
    fake.set_script(
        {
            "models": [MODEL],
            "responses": [
                {"chunks": [{"content": "par"}], "stall_after": 1},
                {"chunks": [{"content": "ok"}]},
            ],
        }
    )
    stack = open_stack()
    assert (await _escape_at_first_text(stack, "q")).status == "cancelled"
    await stack.agent.warmup()
    outcome = await stack.agent.run_turn(TurnRequest("user", "now y"))
    assert outcome == TurnOutcome("answered", text="ok")
    warm, last = fake.requests[-2:]
    assert warm["options"]["num_predict"] == 1
    assert warm["messages"][1:] == [{"role": "user", "content": f"q\n\n{STOP_NOTE}"}]
    # the stopped prompt stays where it was; the next prompt is a message of its own
    assert last["messages"][1:] == [
        {"role": "user", "content": f"q\n\n{STOP_NOTE}"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "now y"},
    ]
    # the session file keeps the marker where the stop happened
    assert stack.reopen().history == [
        Message(role="user", content="q"),
        Message(role="assistant", content=STOP_MARKER),
        Message(role="user", content="now y"),
        Message(role="assistant", content="ok"),
    ]


@pytest.mark.parametrize(
    ("response", "needle"),
    [
        ({"status": 500, "error": "boom"}, "Ollama error (HTTP 500): boom"),
        ({"chunks": [{"content": "half"}], "error_line_after": 1, "error": "oom"}, "oom"),
        ({"chunks": [{"content": "half"}], "malformed_after": 1}, "invalid reply"),
        ({"chunks": [{"content": "half"}], "no_done": True}, "ended early"),
    ],
)
async def test_server_failures_leave_history_usable(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path, response: dict[str, Any], needle: str
) -> None:
    fake.set_script({"models": [MODEL], "responses": [response, {"chunks": [{"content": "ok"}]}]})
    stack = open_stack()
    outcome = await stack.agent.run_turn(TurnRequest("user", "q"))
    assert outcome.status == "error" and needle in outcome.error
    # A prompt the model never saw (an error status before any reply) left the history;
    # one it saw stays, unanswered.
    reached = "status" not in response
    assert stack.session.history == ([Message(role="user", content="q")] if reached else [])
    # the next turn works on the same, consistent history
    outcome = await stack.agent.run_turn(TurnRequest("user", "again"))
    assert outcome == TurnOutcome("answered", text="ok")
    # the unanswered prompt and the new one are two user messages, never one, with the
    # empty reply between them (strict chat templates refuse two in a row)
    sent = [(m["role"], m["content"]) for m in fake.requests[-1]["messages"][1:]]
    unanswered = [("user", "q"), ("assistant", "")] if reached else []
    assert sent == [*unanswered, ("user", "again")]


async def test_missing_model(open_stack: OpenStack, fake: FakeOllama, workspace: Path) -> None:
    stack = open_stack()
    stack.agent.set_model("nosuch:latest")
    outcome = await stack.agent.run_turn(TurnRequest("user", "q"))
    assert outcome.error == (
        "model 'nosuch:latest' not found on Ollama: run `ollama pull nosuch:latest`, "
        "or pick a served model with /model"
    )
    assert stack.session.model == "nosuch:latest"
    # no model answered: nothing is written, so /sessions and --resume never offer it
    assert not stack.store.is_saved(stack.session.id)


async def test_warmup_is_disposable(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    stack = open_stack()
    await stack.agent.warmup()
    assert fake.requests[0]["model"] == MODEL
    assert fake.requests[0]["options"]["num_predict"] == 1
    assert fake.wait_for_outcomes(1) == ["warmup"]
    assert stack.session.history == [] and stack.session.events == []


async def test_warmup_sends_the_first_turns_prefix(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script({"responses": [{"chunks": [{"content": "ok"}]}], "context_length": 8192})
    stack = open_stack()
    await stack.agent.warmup()
    assert await stack.agent.run_turn(TurnRequest("user", "q")) == TurnOutcome("answered", "ok")
    warm, first = fake.requests
    # The server's prompt cache then holds the first step's system prompt and tool schemas.
    assert warm["messages"] == first["messages"][: len(warm["messages"])]
    assert [m["role"] for m in warm["messages"]] == ["system"]
    assert warm["tools"] == first["tools"] and warm["tools"]
    assert warm["think"] == first["think"]
    # The same window (another num_ctx would make Ollama load the model again): the
    # server's 8192, smaller than the default.
    assert warm["options"]["num_ctx"] == first["options"]["num_ctx"] == 8192
    assert first["options"]["num_predict"] == 4096


async def test_warmup_of_a_resumed_session_includes_its_history(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    stack = open_stack()
    await stack.agent.run_turn(TurnRequest("user", "first"))
    await stack.agent.warmup()
    turn, warm = fake.requests
    assert [m["role"] for m in warm["messages"]] == ["system", "user", "assistant"]
    assert warm["messages"][0] == turn["messages"][0]
    assert [m.role for m in stack.session.history] == ["user", "assistant"]  # unchanged


async def test_warmup_of_a_model_without_thinking_asks_again_without_it(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    stack = open_stack()
    calls: list[bool] = []
    real = stack.client.stream_chat

    def refusing(request: ChatRequest) -> Any:
        calls.append(request.think)
        if request.think:
            raise ModelHTTPError(400, f"{MODEL} does not support thinking")
        return real(request)

    stack.client.stream_chat = refusing  # type: ignore[method-assign]
    await stack.agent.warmup()
    await stack.agent.run_turn(TurnRequest("user", "q"))
    assert calls == [True, False, False]  # the turn no longer asks for thinking


def _relayed(task: str) -> TurnRequest:
    sender = RelaySender(instance_id="1-abcdef01", pid=1, project="peer", workspace="/w")
    return TurnRequest("relay", task, sender)


async def test_a_relayed_turn_that_never_reached_the_model_leaves_no_history(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    stack = open_stack()
    stack.agent.set_model("nosuch:latest")  # a 404 head: the model never saw the task
    outcome = await stack.agent.run_turn(_relayed("the task"))
    assert (outcome.status, outcome.reached_model) == ("error", False)
    assert stack.session.history == []
    assert [e.role for e in stack.session.events] == ["relay", "error"]  # the user saw it
    with pytest.raises(SessionNotFound):  # no model answered in it: nothing was written
        stack.reopen()


async def test_an_unreachable_server_is_not_reaching_the_model(workspace: Path) -> None:
    with FakeOllama({"models": [MODEL]}) as fake:
        url = fake.url
    # Nothing listens at url now (the fake released its port).
    with FakeOllama({"models": [MODEL]}) as other:
        stack = Stack(other, workspace)
        await stack.client.aclose()
        stack.client = OllamaClient(url, stall=StallLimits(5, 5))
        stack.agent = Agent(
            config=stack.config,
            client=stack.client,
            toolbox=Toolbox(core_tools()),
            approver=stack.approver,
            store=stack.store,
            session=stack.session,
            sink=stack.sink,
        )
        try:
            relayed = await stack.agent.run_turn(_relayed("the task"))
            local = await stack.agent.run_turn(TurnRequest("user", "q"))
        finally:
            await stack.client.aclose()
    assert (relayed.status, relayed.reached_model) == ("error", False)
    assert "not reachable" in relayed.error
    # A local prompt the model never saw leaves the history too: only the user sends it
    # again (the app hands it back to the input); the transcript keeps what the user saw.
    assert (local.status, local.reached_model) == ("error", False)
    assert stack.session.history == []
    assert [e.role for e in stack.session.events][-2:] == ["user", "error"]


async def test_a_relayed_turn_that_reached_the_model_counts_as_executed(
    open_stack: OpenStack, fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script(
        {"models": [MODEL], "responses": [_tool("read_file", path="a.py"), {"status": 500}]}
    )
    stack = open_stack()
    outcome = await stack.agent.run_turn(_relayed("the task"))
    assert (outcome.status, outcome.reached_model) == ("error", True)
    assert [m.role for m in stack.session.history] == ["user", "assistant", "tool"]
    assert stack.session.history[0].content.startswith("<agent_relay>")
