"""A relayed turn's question expires after ``[relay] question_timeout`` and tells its sender
that the task waits, then goes on (``asking.ExpiringQuestions``); a local turn's never
expires. Trio's autojump clock stands in for the wait: no test waits in wall-clock time."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

import pytest
import trio
import trio.testing

from tests.agent.doubles import FakeApprover, call, text, tools
from tests.agent.test_loop import SENDER, make_rig
from zcoder.agent import approvals
from zcoder.agent.agent import TurnRequest
from zcoder.app.relay.asking import ExpiringQuestions, answered_detail, waiting_reason
from zcoder.approval.questions import Answer, ApprovalRequest
from zcoder.conversation import Origin
from zcoder.errors import QuestionExpired
from zcoder.live import ToolUpdate
from zcoder.relay.envelope import Enqueue
from zcoder.relay.inbound import Effect, Inbound, Tell
from zcoder.relay.settings import RelaySettings
from zcoder.relay.spool.news import Claimed
from zcoder.sandbox.probe import SandboxCheck


def question(
    origin: Origin = "relay",
    kind: Literal["command", "write"] = "command",
    text_: str = "make test",
) -> ApprovalRequest:
    return ApprovalRequest(kind=kind, text=text_, choices=("y", "n"), origin=origin)


class Waits:
    """The relay link's part: a real ``Inbound`` with one relayed message running; the
    receipts it would send are ``told``."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.inbound = Inbound("accept")
        sender = "42110-0badf00d"
        envelope = Enqueue(
            1, "enqueue", f"{sender}-1", "303-feedc0de", sender, 42110, "alpha", "/w", "task", 0
        )
        self.inbound.claimed(Claimed(1, envelope, True, Path("/spool/processing/1")))
        self.inbound.reached()

    def _tell(self, effects: list[Effect]) -> None:
        self.told += [(e.state, e.detail) for e in effects if isinstance(e, Tell)]

    def question_asked(self, reason: str) -> None:
        self._tell(self.inbound.asking(reason))

    def question_answered(self, detail: str, *, expired: bool) -> None:
        self._tell(self.inbound.answered(detail, expired=expired))

    def unattended(self) -> bool:
        return self.inbound.unattended


class Late(FakeApprover):
    """Answers ``answer`` after ``after`` seconds (``None``: never)."""

    def __init__(self, answer: Answer = "y", after: float | None = None) -> None:
        super().__init__()
        self.answer, self.after = answer, after
        self.open = False

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.asked.append(request)
        self.open = True
        try:
            if self.after is None:
                await trio.sleep_forever()
            await trio.sleep(self.after)
            return self.answer
        finally:
            self.open = False  # the question line goes away, answered or not


async def test_a_relayed_question_nobody_answers_expires_after_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waits, line = Waits(), Late(after=None)
    asker = ExpiringQuestions(line, waits, 2.0)
    start = trio.current_time()
    with pytest.raises(QuestionExpired) as caught:
        await asker.ask(question())
    assert trio.current_time() - start == pytest.approx(2.0)
    assert caught.value.seconds == 2.0 and not line.open
    assert waits.told == [
        ("waiting", "asks its user to approve: make test"),
        ("started", "nobody answered in 2 s (counted as no)"),
    ]


@pytest.mark.parametrize(
    ("answer", "said"), [("y", "its user approved"), ("n", "its user said no")]
)
async def test_an_answer_in_time_is_the_answer_and_the_sender_hears_how_it_ended(
    answer: Answer, said: str, autojump_clock: trio.testing.MockClock
) -> None:
    waits = Waits()
    asker = ExpiringQuestions(Late(answer, after=299.0), waits, 300.0)
    assert await asker.ask(question()) == answer
    assert [state for state, _ in waits.told] == ["waiting", "started"]
    assert waits.told[1][1] == said


async def test_a_local_question_never_expires_and_tells_nobody(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waits = Waits()
    asker = ExpiringQuestions(Late("y", after=100_000.0), waits, 2.0)
    assert await asker.ask(question(origin="user")) == "y"
    assert waits.told == []


async def test_a_timeout_of_0_waits_as_long_as_it_takes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waits = Waits()
    asker = ExpiringQuestions(Late("y", after=1e7), waits, 0.0)
    assert await asker.ask(question()) == "y"
    assert [state for state, _ in waits.told] == ["waiting", "started"]


async def test_a_turn_stopped_while_it_asks_tells_no_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    waits, line = Waits(), Late(after=None)
    asker = ExpiringQuestions(line, waits, 300.0)
    with trio.move_on_after(5.0):  # Escape, before the question expires
        await asker.ask(question())
    assert [state for state, _ in waits.told] == ["waiting"] and not line.open


def test_the_reason_says_what_the_user_is_asked_on_one_line() -> None:
    assert waiting_reason(question(text_="make\n  test")) == "asks its user to approve: make test"
    long = waiting_reason(question(text_="x" * 500))
    assert len(long) < 250 and long.endswith("...")
    write = waiting_reason(question(kind="write", text_="AGENTS.md: instructions\nmore"))
    assert write.endswith("control file: AGENTS.md: instructions")
    tool = ApprovalRequest(kind="tool", text="{}", choices=("y", "n"), target="demo__add")
    assert waiting_reason(tool) == "asks its user to approve a call of the MCP tool demo__add"
    send = ApprovalRequest(kind="send", text="done", choices=("y", "n"), target="x")
    assert waiting_reason(send) == "asks its user to approve sending its reply to you"
    assert answered_detail(None, 300.0).startswith("nobody answered in 300 s")


async def test_an_expired_command_question_is_a_no_the_model_reads_and_the_turn_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    waits = Waits()
    replies = [tools(call("run_command", command="make test")), text("I could not run the tests.")]
    asker = ExpiringQuestions(Late(after=None), waits, 300.0)
    rig = make_rig(tmp_path, replies, approver=cast(Any, asker))
    start = trio.current_time()
    outcome = await rig.agent.run_turn(TurnRequest("relay", "run the tests", SENDER))
    assert trio.current_time() - start == pytest.approx(300.0)
    assert outcome.status == "answered" and outcome.text == "I could not run the tests."
    assert rig.toolbox.calls == []  # nothing ran
    result = next(m for m in rig.session.history if m.role == "tool")
    assert result.content.startswith(
        "the local user did not answer in 300 seconds: the command did not run (nothing ran)"
    )
    lines = [e.text for e in rig.session.events if e.role == "system"]
    assert lines == ["The question expired: nobody answered in 300 s, so the command did not run."]
    (card,) = [e for e in rig.sink.events if isinstance(e, ToolUpdate) and e.state == "denied"]
    assert card.result is not None and card.result.summary == (
        "the question expired (no answer in 300 s)"
    )
    assert [state for state, _ in waits.told] == ["waiting", "started"]


async def test_after_an_expiry_the_tasks_later_questions_are_not_asked(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    waits, line = Waits(), Late(after=None)
    replies = [
        tools(call("run_command", command="make test")),
        tools(call("run_command", command="make lint")),
        text("Neither ran."),
    ]
    rig = make_rig(tmp_path, replies, approver=cast(Any, ExpiringQuestions(line, waits, 300.0)))
    start = trio.current_time()
    outcome = await rig.agent.run_turn(TurnRequest("relay", "test and lint", SENDER))
    # One timeout in all, not one per question: the queue behind it waits 300 s.
    assert trio.current_time() - start == pytest.approx(300.0)
    assert outcome.text == "Neither ran." and rig.toolbox.calls == []
    assert [q.text for q in line.asked] == ["make test"]  # the second was never asked
    second = [m.content for m in rig.session.history if m.role == "tool"][1]
    assert second.startswith(
        "not asked: the local user did not answer an earlier question of this task in 300 "
        "seconds, so the command did not run (nothing ran)"
    )
    assert [e.text for e in rig.session.events if e.role == "system"][1] == (
        "Not asked: nobody answered this relayed task's earlier question in 300 s, so the "
        "command did not run."
    )
    assert [state for state, _ in waits.told] == ["waiting", "started"]  # no second wait


async def test_an_expired_question_to_run_outside_the_sandbox_leaves_the_sandboxed_way_open(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``[relay] commands = "sandbox"`` only a command asked to run outside asks: the
    sender hears that, and after its expiry the model reads that it can run it inside."""
    monkeypatch.setattr(approvals, "check_sandbox", lambda: SandboxCheck(True, "/usr/bin/bwrap"))
    waits, line = Waits(), Late(after=None)
    replies = [
        tools(call("run_command", command="curl -O x", outside_sandbox="it needs the network")),
        tools(call("run_command", command="make test")),
        text("Ran the tests in the sandbox."),
    ]
    asker = ExpiringQuestions(line, waits, 300.0)
    settings = RelaySettings(commands="sandbox")
    rig = make_rig(tmp_path, replies, approver=cast(Any, asker), relay=settings)
    outcome = await rig.agent.run_turn(TurnRequest("relay", "fetch and test", SENDER))
    assert outcome.text == "Ran the tests in the sandbox."
    assert waits.told[0] == (
        "waiting",
        "asks its user to approve running OUTSIDE the sandbox: curl -O x",
    )
    refused = next(m.content for m in rig.session.history if m.role == "tool")
    assert refused.startswith("the local user did not answer in 300 seconds")
    assert "Without outside_sandbox it runs in the sandbox, unasked." in refused
    assert [c[1]["command"] for c in rig.toolbox.calls] == ["make test"]  # after the expiry


async def test_a_relayed_command_denied_by_the_relay_setting_says_so_on_its_card(
    tmp_path: Path,
) -> None:
    replies = [tools(call("run_command", command="make")), text("ok")]
    rig = make_rig(tmp_path, replies, relay=RelaySettings(commands="deny"))
    await rig.agent.run_turn(TurnRequest("relay", "build", SENDER))
    (card,) = [e for e in rig.sink.events if isinstance(e, ToolUpdate) and e.state == "denied"]
    assert card.result is not None and card.result.summary == "relayed commands denied"
    assert rig.toolbox.calls == []
