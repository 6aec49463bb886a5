"""After stopped turns, SmolLM2 answers the next tasks instead of repeating the stop.

A history holding the stop marker as the model's own replies made it answer later tasks,
relayed ones too, with exactly that text (greedy decoding, three stops: about half of the
tasks here). The requests carry a stop as a user-side note in the stopped prompt's own
message, then an empty assistant message, then the next prompt as a message of its own; the
model must repeat neither the marker nor the note, nor copy the empty reply. Both chat
templates: SmolLM2's own and the ChatML one that renders tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.doubles import FakeApprover, FakeSession, FakeStore, RecordingSink, make_config
from tests.realmodel.llama_server import LlamaServer
from zcoder.agent.agent import Agent, TurnRequest
from zcoder.agent.openai import OpenAIClient
from zcoder.agent.turns import STOP_MARKER, RelaySender
from zcoder.approval.questions import Answer
from zcoder.conversation import Message
from zcoder.tools.registry import Toolbox, core_tools

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(300)]

STOPPED = (
    "Write a long story about a dragon.",
    "List every file in this project.",
    "Explain the code base.",
)
SENDER = RelaySender("4000-1", 4000, "other-project", "/work/other", True)
TASKS = (
    TurnRequest("user", "What is the capital of France?"),
    TurnRequest("relay", "Say hello in one short sentence.", sender=SENDER),
    TurnRequest("user", "What does the file a.py do?"),
    TurnRequest("relay", "Name three colours.", sender=SENDER),
    TurnRequest("user", "Write a Python function that adds two numbers."),
)
DENY: Answer = "n"
# What a parroted stop reads like: the marker, or the note sent in its place.
PARROTED = ("stopped by user", "interrupted by user")


async def _run(server: LlamaServer, workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    session = FakeSession(workspace=workspace)
    session.history = [
        m for task in STOPPED for m in (Message("user", task), Message("assistant", STOP_MARKER))
    ]
    config = make_config(
        workspace, model="smollm2", host=server.url, temperature=0.0, max_output_tokens=32
    )
    async with OpenAIClient(f"{server.url}/v1") as client:
        agent = Agent(
            config=config,
            client=client,
            toolbox=Toolbox(core_tools()),
            approver=FakeApprover(*[DENY] * 20),  # a command it asks for does not run
            store=cast(Any, FakeStore()),
            session=cast(Any, session),
            sink=RecordingSink(),
        )
        answers = []
        for task in TASKS:
            outcome = await agent.run_turn(task)
            answers.append(outcome.text or outcome.error)
    print(f"\nanswers after {len(STOPPED)} stops: {answers}")
    assert not [a for a in answers if any(p in a.lower() for p in PARROTED)], answers
    # the empty assistant message between a stopped prompt and the next is not copied
    assert all(a.strip() and "empty replies" not in a for a in answers), answers
    # the history still records each stop where it happened
    assert [m.content for m in session.history].count(STOP_MARKER) == len(STOPPED)


async def test_stops_are_not_repeated_with_the_models_own_template(
    plain_server: LlamaServer, tmp_path: Path
) -> None:
    await _run(plain_server, tmp_path)


async def test_stops_are_not_repeated_with_the_tools_template(
    tool_server: LlamaServer, tmp_path: Path
) -> None:
    await _run(tool_server, tmp_path)
