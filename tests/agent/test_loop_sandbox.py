"""A turn whose commands run in the sandbox: unasked and confined, the model's request to
run one outside it, ``[relay] commands``, and what the model is offered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.doubles import (
    FakeApprover,
    FakeSession,
    FakeStore,
    FakeToolbox,
    RecordingSink,
    Reply,
    ScriptedClient,
    call,
    make_config,
    text,
    tools,
)
from zcoder.agent import approvals
from zcoder.agent.agent import Agent, RelaySender, TurnRequest
from zcoder.approval.questions import Answer
from zcoder.relay.settings import RelaySettings
from zcoder.sandbox.plan import Confinement
from zcoder.sandbox.probe import SandboxCheck
from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import CheckedCall

SENDER = RelaySender("42110-777", 42110, "user-profiles", "/work/app/user-profiles", True)
WORKS = SandboxCheck(True, "/usr/bin/bwrap")


class ConfinedToolbox(FakeToolbox):
    """Records, for each call it runs, how it was confined."""

    def __init__(self) -> None:
        super().__init__()
        self.sandboxes: list[Confinement | None] = []

    async def run(self, checked: CheckedCall, ctx: ToolContext) -> ToolResult:
        self.sandboxes.append(ctx.sandbox)
        return await super().run(checked, ctx)


@pytest.fixture(autouse=True)
def sandbox_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approvals, "check_sandbox", lambda: WORKS)


def rig(
    tmp_path: Path, replies: Sequence[Reply], *answers: Answer, **config: Any
) -> tuple[Agent, ConfinedToolbox, FakeApprover, ScriptedClient]:
    box, approver, client = ConfinedToolbox(), FakeApprover(*answers), ScriptedClient(replies)
    agent = Agent(
        config=make_config(tmp_path, **config),
        client=client,
        toolbox=cast(Any, box),
        approver=approver,
        store=cast(Any, FakeStore()),
        session=cast(Any, FakeSession(workspace=tmp_path)),
        sink=RecordingSink(),
    )
    return agent, box, approver, client


def run_command_spec(client: ScriptedClient) -> Mapping[str, Any]:
    specs = client.requests[0].tools
    return next(s["function"] for s in specs if s["function"]["name"] == "run_command")


async def test_every_command_runs_confined_without_a_question(tmp_path: Path) -> None:
    replies = [tools(call("run_command", command="make")), text("ok")]
    agent, box, approver, client = rig(tmp_path, replies, command_policy="sandbox")
    await agent.run_turn(TurnRequest("user", "build"))
    assert approver.asked == [] and [c[0] for c in box.calls] == ["run_command"]
    (confined,) = box.sandboxes
    assert confined is not None and confined.workspace == tmp_path and not confined.network
    spec = run_command_spec(client)
    assert "Commands run in a sandbox" in spec["description"]
    assert "outside_sandbox" in spec["parameters"]["properties"]


async def test_outside_the_sandbox_asks_and_runs_outside_only_on_yes(tmp_path: Path) -> None:
    why = "needs the network"
    first = call("run_command", command="curl -O x", outside_sandbox=why)
    second = call("run_command", command="curl -O y", outside_sandbox=why)
    replies = [tools(first), tools(second), text("ok")]
    agent, box, approver, _ = rig(tmp_path, replies, "n", "y", command_policy="sandbox")
    await agent.run_turn(TurnRequest("user", "fetch"))
    assert [(q.choices, q.outside_sandbox) for q in approver.asked] == [
        (("y", "n"), "its reason: needs the network"),
    ] * 2
    assert box.sandboxes == [None]  # the ``n`` ran nothing; the ``y`` ran it outside
    denied = agent.session.history[2].content
    assert denied.startswith("user denied running this command outside the sandbox: curl")


async def test_relay_commands_sandbox_confines_relayed_turns_alone(tmp_path: Path) -> None:
    replies = [tools(call("run_command", command="make")), text("ok")] * 2
    settings = RelaySettings(commands="sandbox")
    agent, box, approver, client = rig(tmp_path, replies, "y", relay=settings)
    await agent.run_turn(TurnRequest("relay", "build it", SENDER))
    assert approver.asked == [] and box.sandboxes[0] is not None
    await agent.run_turn(TurnRequest("user", "build"))  # a local turn asks, as before
    assert [q.outside_sandbox for q in approver.asked] == [""] and box.sandboxes[1] is None
    local = client.requests[-1].tools
    spec = next(s["function"] for s in local if s["function"]["name"] == "run_command")
    assert "outside_sandbox" not in spec["parameters"]["properties"]


async def test_a_sandbox_asked_for_but_unusable_never_runs_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = SandboxCheck(False, reason="bwrap is not installed", fix="install bubblewrap")
    monkeypatch.setattr(approvals, "check_sandbox", lambda: missing)
    replies = [tools(call("run_command", command="make")), text("ok")]
    agent, box, approver, _ = rig(tmp_path, replies, command_policy="sandbox")
    await agent.run_turn(TurnRequest("user", "build"))
    assert box.calls == [] and approver.asked == []
    assert agent.session.history[2].content == (
        "Error: the sandbox cannot work here: bwrap is not installed (install bubblewrap); "
        "nothing ran"
    )


async def test_commands_that_ask_instead_of_the_sandbox_say_so(tmp_path: Path) -> None:
    replies = [tools(call("run_command", command="make")), text("ok")]
    note = "config file x: command_policy = ...; commands ask instead"
    agent, _, approver, _ = rig(
        tmp_path, replies, "y", sandbox_note=note, unsandboxed=frozenset({"user"})
    )
    await agent.run_turn(TurnRequest("user", "build"))
    assert [q.outside_sandbox for q in approver.asked] == ["the sandbox cannot work here"]


async def test_a_local_question_says_nothing_of_a_sandbox_meant_for_relayed_turns(
    tmp_path: Path,
) -> None:
    # Only [relay] commands asked for the sandbox: a local turn's commands were always
    # asked, and their question does not claim to run outside a sandbox.
    replies = [tools(call("run_command", command="make")), text("ok")]
    note = 'config file x: [relay] commands = "sandbox": ...; commands ask instead'
    agent, _, approver, _ = rig(
        tmp_path, replies, "y", sandbox_note=note, unsandboxed=frozenset({"relay"})
    )
    await agent.run_turn(TurnRequest("user", "build"))
    assert [q.outside_sandbox for q in approver.asked] == [""]
