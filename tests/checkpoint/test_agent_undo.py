"""Checkpoints as the agent takes them: real tools and commands against the fake Ollama,
the real session store, a relayed turn undone by its number, the note the model reads
next, and an undo after the session is resumed by another agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.doubles import FakeApprover, RecordingSink, make_config
from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.agent import Agent, RelaySender, TurnRequest
from zcoder.agent.model import StallLimits
from zcoder.agent.ollama import OllamaClient
from zcoder.checkpoint.settings import CheckpointSettings
from zcoder.checkpoint.tracker import Checkpoints
from zcoder.errors import CheckpointError
from zcoder.session.store import Session, SessionStore
from zcoder.tools.registry import Toolbox, core_tools

MODEL = "qwen3-coder:latest"
ALPHA = RelaySender("inst-alpha", 4242, "alpha", "/elsewhere", verified=True)


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"chunks": [{"tool_calls": [{"name": name, "arguments": arguments}]}]}


def _answer(text: str) -> dict[str, Any]:
    return {"chunks": [{"content": text}]}


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama({"models": [MODEL]}) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    (ws / "b.txt").write_text("b\n")
    return ws


def _agent(
    fake: FakeOllama, ws: Path, store: SessionStore, session: Session
) -> tuple[Agent, OllamaClient]:
    config = make_config(ws, model=MODEL, host=fake.url)
    client = OllamaClient(fake.url, stall=StallLimits(5, 5))
    agent = Agent(
        config=config,
        client=client,
        toolbox=Toolbox(core_tools()),
        approver=FakeApprover(*"yyyyyy"),
        store=store,
        session=session,
        sink=RecordingSink(),
        checkpoints=Checkpoints(config.home, ws, CheckpointSettings()),
    )
    return agent, client


async def test_undo_by_number_tells_the_model_and_survives_a_resume(
    fake: FakeOllama, workspace: Path
) -> None:
    fake.set_script(
        {
            "models": [MODEL],
            "responses": [
                _tool("write_file", path="new.py", content="print('new')\n"),
                _tool("run_command", command="echo local >> b.txt"),
                _answer("local done"),
                _tool("run_command", command="rm a.py; echo relayed > r.txt"),
                _answer("relayed done"),
                _tool("read_file", path="b.txt"),
                _answer("read it"),
            ],
        }
    )
    store = SessionStore(make_config(workspace).home, workspace, "coding")
    session = store.create(MODEL)
    agent, client = _agent(fake, workspace, store, session)
    await agent.run_turn(TurnRequest("user", "make new.py"))
    assert agent.turn_changes == ("b.txt", "new.py")
    await agent.run_turn(TurnRequest("relay", "clean up", ALPHA))
    assert agent.turn_changes == ("a.py", "r.txt")
    (workspace / "b.txt").write_text("the user's line\n")  # the user's own edit meanwhile

    lines = await agent.undo(2)
    assert lines == ["Took back turn 2 (relayed by alpha (pid 4242)): restored a.py; "
                     "removed r.txt (created by the turn)."]  # fmt: skip
    assert (workspace / "a.py").read_text() == "x = 1\n" and not (workspace / "r.txt").exists()

    await agent.run_turn(TurnRequest("user", "what now?"))  # reads only: no checkpoint
    assert agent.turn_changes is None
    note, no_reply, prompt = fake.requests[-2]["messages"][-3:]
    assert note["role"] == "user"
    assert note["content"] == (
        "[The user took back the file changes of turn 2 with /undo. Restored to how they "
        "were before: a.py. Removed (they did not exist before): r.txt. Read a file again "
        "before relying on its content.]"
    )
    assert (no_reply["role"], no_reply["content"]) == ("assistant", "")
    assert (prompt["role"], prompt["content"]) == ("user", "what now?")
    await client.aclose()

    store.release(session)
    resumed = store.open(session.id)  # as zcoder --resume does, in a new process
    again, client = _agent(fake, workspace, store, resumed)
    lines = await again.undo(None)
    assert lines[0] == "Took back turn 1 (you): removed new.py (created by the turn)."
    assert lines[1].startswith("Kept b.txt as it is: it changed since turn 1 outside zcoder;")
    assert (workspace / "b.txt").read_text() == "the user's line\n"
    assert not (workspace / "new.py").exists()
    with pytest.raises(
        CheckpointError, match="every turn of this session that changed files is taken back"
    ):
        await again.undo(None)
    await client.aclose()


async def test_a_write_through_a_symlinked_directory_is_recorded_as_git_names_it(
    fake: FakeOllama, workspace: Path
) -> None:
    # The model names link/a.py; the tool writes real/a.py, and git would refuse the
    # first name (beyond a symbolic link), failing the turn's checkpoint.
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to("real")
    fake.set_script(
        {
            "models": [MODEL],
            "responses": [_tool("write_file", path="link/a.py", content="x\n"), _answer("ok")],
        }
    )
    store = SessionStore(make_config(workspace).home, workspace, "coding")
    agent, client = _agent(fake, workspace, store, store.create(MODEL))
    await agent.run_turn(TurnRequest("user", "write it"))
    await client.aclose()
    assert agent.turn_changes == ("real/a.py",)
