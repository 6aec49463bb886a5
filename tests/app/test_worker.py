"""The turn worker as the app builds it (``build_app``): intents in, events out, turns run
through the real relay on real sockets in one Trio run. The receiver is made by
``build_app`` over a scripted model; the sender is a relay instance as in
``test_relay_app``. Local prompts, relayed messages on their own, the fair order, Escape
(on a relayed and on a local turn) and a relayed message that waits for the model."""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs
import trio
import trio.testing

from tests.agent.doubles import (
    HANG,
    FakeApprover,
    FakeSession,
    FakeStore,
    ScriptedClient,
    call,
    make_config,
    text,
    tools,
)
from tests.app.test_relay_app import Instance, start
from tests.app.test_relay_receipts import receipts, reported
from zcoder.agent.model import ChatRequest, ModelInfo
from zcoder.app.core import AppCore, build_app
from zcoder.approval.questions import Answer, ApprovalRequest, Approver
from zcoder.commands import ParsedCommand, interpret
from zcoder.config import RelaySettings
from zcoder.conversation import TranscriptEvent
from zcoder.errors import ModelError
from zcoder.live import Entry
from zcoder.ui.agents_text import RUNS_AGAIN
from zcoder.ui.events import (
    CancelTurn,
    Command,
    Notice,
    Prompt,
    Queued,
    RelayControl,
    RelayStopped,
    Returned,
    ServerState,
    Show,
    TurnBegan,
    TurnEnded,
    WarmUpRequest,
    WorkerEvent,
)

E = TypeVar("E", bound=WorkerEvent)
UNREACHABLE = "cannot connect to the model server"
WARM_UP = "(warm-up)"  # a request with no user message: the warm-up's, in a new session
WAIT = 5  # seconds: a bound for a test that hangs, never a measurement


class Client(ScriptedClient):
    """A scripted model whose server may be ``down`` (its model listing fails too);
    ``checks`` counts the listings asked (the worker's server checks)."""

    down = False
    checks = 0

    async def list_models(self) -> list[ModelInfo]:
        self.checks += 1
        if self.down:
            raise ModelError(UNREACHABLE)
        return await super().list_models()


class Gate:
    """An approver that blocks on its first question until ``release``d, then says no:
    it holds a local turn open while the test queues work behind it."""

    def __init__(self) -> None:
        self.asked = trio.Event()
        self.release = trio.Event()

    async def ask(self, request: ApprovalRequest) -> Answer:
        self.asked.set()
        await self.release.wait()
        return "n"


@attrs.define
class Receiver:
    """An instance made by ``build_app``: its relay and its worker started; ``log`` holds
    every worker event read so far, in order."""

    core: AppCore
    client: Client
    log: list[WorkerEvent] = attrs.Factory(list)

    @property
    def id(self) -> str:
        service = self.core.backend.relay.service
        return service.status().instance_id if service is not None else ""

    async def tell(self, *intents: Any) -> None:
        for intent in intents:
            await self.core.intents.send(intent)

    async def next(self, kind: type[E], where: Callable[[E], bool] = lambda _: True) -> E:
        """Read events until one of ``kind`` (that ``where`` accepts); the events read
        before it stay in ``log``."""
        with trio.fail_after(WAIT):
            while True:
                event = await self.core.events.receive()
                self.log.append(event)
                if isinstance(event, kind) and where(event):
                    return event

    async def turns(self, n: int) -> None:
        """Until ``n`` more turns ended."""
        for _ in range(n):
            await self.next(TurnEnded)

    def began(self) -> list[str]:
        return [e.relayed_from for e in self.log if isinstance(e, TurnBegan)]

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.log if isinstance(e, kind)]

    def entries(self) -> list[TranscriptEvent]:
        return [e.event.event for e in self.of(Show) if isinstance(e.event, Entry)]

    def asked(self, *topics: str) -> list[str]:
        """For each model request, which of ``topics`` its last user message carries."""
        found = []
        for request in self.client.requests:
            last = _last_user(request)
            found.append(next((t for t in topics if t in last), "?") if last else WARM_UP)
        return found


def _last_user(request: ChatRequest) -> str:
    return ([m.content for m in request.messages if m.role == "user"] or [""])[-1]


async def receiver(
    nursery: trio.Nursery,
    root: Path,
    replies: list[Any],
    *,
    approver: Approver | None = None,
    warmup: bool = False,
    down: bool = False,
) -> Receiver:
    """``beta``, built as the app builds it, with its relay and its worker running."""
    workspace, runtime = root / "beta", root / "rt-beta"
    workspace.mkdir()
    runtime.mkdir(mode=0o700)
    config = make_config(workspace, relay=RelaySettings(dir=root / "agents"), warmup=warmup)
    client = Client(replies)
    client.down = down
    core = build_app(
        config,
        cast(Any, FakeStore()),
        cast(Any, FakeSession(workspace)),
        client,
        runtime,
        approver=approver or FakeApprover(),
    )
    assert await core.backend.start_relay(nursery) == ""
    await nursery.start(core.worker.run)
    return Receiver(core, client)


async def deliver(a: Instance, b: Receiver, message: str) -> str:
    peer = next(p for p in await a.backend.sends.discover() if p.manifest.instance_id == b.id)
    return (await a.backend.sends.deliver(peer, message)).status


def sent_ids(a: Instance) -> list[str]:
    return [s.message_id for s in a.backend.sends.outbox.outbox.entries()]


async def test_a_local_prompt_runs_as_a_turn_and_its_answer_is_shown(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        b = await receiver(nursery, short_tmp, [text("hi ", "there")])
        await b.tell(Prompt("hello"))
        ended = await b.next(TurnEnded)
        assert ended == TurnEnded(True)
        assert b.began() == [""]
        assert b.of(Queued) == [Queued(("hello",)), Queued(())]
        assert b.asked("hello") == ["hello"]
        answers = [e.text for e in b.entries() if e.role == "assistant"]
        assert answers == ["hi there"]
        began = b.log.index(TurnBegan(""))
        shown = [i for i, e in enumerate(b.log) if isinstance(e, Show)]
        assert shown and began < min(shown) and max(shown) < b.log.index(ended)
        nursery.cancel_scope.cancel()


async def test_a_relayed_message_runs_on_its_own_and_its_sender_gets_receipts(
    short_tmp: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await receiver(nursery, short_tmp, [text("renamed it")])
        assert await deliver(a, b, "rename users.name") == "accepted"
        assert await b.next(TurnEnded) == TurnEnded(True)
        assert b.began() == ["alpha"]  # nothing was typed
        assert b.asked("rename users.name") == ["rename users.name"]
        assert _last_user(b.client.requests[0]).startswith("<agent_relay>\n")
        (mid,) = sent_ids(a)
        await reported(a, mid, "completed")
        assert [e.meta["receipt"] for e in receipts(a)] == ["started", "completed"]
        assert b.core.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_one_relayed_message_runs_before_each_local_item(short_tmp: Path) -> None:
    gate = Gate()
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        replies = [tools(call("run_command", command="true")), text("answer")]
        b = await receiver(nursery, short_tmp, replies, approver=gate)
        await b.tell(Prompt("local-one"))
        with trio.fail_after(WAIT):
            await gate.asked.wait()  # the first local turn is open
        assert [await deliver(a, b, m) for m in ("relayed-one", "relayed-two")] == ["accepted"] * 2
        await b.tell(Prompt("local-two"), Prompt("local-three"))
        await trio.testing.wait_all_tasks_blocked()
        assert b.core.backend.inbox.status() == ("on", 2)
        gate.release.set()
        await b.turns(5)
        assert b.began() == ["", "alpha", "", "alpha", ""]
        topics = ("local-one", "local-two", "local-three", "relayed-one", "relayed-two")
        order = [topic for topic, _ in groupby(b.asked(*topics))]  # a turn asks once or more
        assert order == ["local-one", "relayed-one", "local-two", "relayed-two", "local-three"]
        assert b.core.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_escape_on_a_relayed_turn_stops_relayed_work_until_resume(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await receiver(nursery, short_tmp, [[HANG], text("answer")])
        assert await deliver(a, b, "relayed-one") == "accepted"
        await b.next(TurnBegan)
        assert [await deliver(a, b, m) for m in ("relayed-two", "relayed-three")] == [
            "accepted"
        ] * 2
        await trio.testing.wait_all_tasks_blocked()
        assert len(b.client.requests) == 1  # the first one hangs in the model

        await b.tell(CancelTurn())
        await b.next(TurnEnded)
        notice = await b.next(Notice)
        assert notice.text.startswith("Relayed work stopped: 2 more relayed messages wait;")
        assert b.of(RelayStopped) == [RelayStopped(True)]
        first = sent_ids(a)[0]
        await reported(a, first, "cancelled")

        # Nothing claimed; new messages are still accepted; local prompts still run.
        await trio.testing.wait_all_tasks_blocked()
        assert len(b.client.requests) == 1 and b.core.backend.inbox.status() == ("on", 2)
        assert await deliver(a, b, "relayed-four") == "accepted"
        await trio.testing.wait_all_tasks_blocked()
        assert len(b.client.requests) == 1 and b.core.backend.inbox.status() == ("on", 3)
        await b.tell(Prompt("local-one"))
        await b.next(TurnEnded)
        await trio.testing.wait_all_tasks_blocked()
        assert b.began() == ["alpha", ""] and len(b.client.requests) == 2

        await b.tell(RelayControl("resume"))
        assert (await b.next(Notice)).text == RUNS_AGAIN
        assert (await b.next(RelayStopped)) == RelayStopped(False)
        await b.turns(3)
        assert b.began() == ["alpha", "", "alpha", "alpha", "alpha"]
        topics = ("local-one", "relayed-one", "relayed-two", "relayed-three", "relayed-four")
        assert b.asked(*topics) == [
            "relayed-one",
            "local-one",
            "relayed-two",
            "relayed-three",
            "relayed-four",
        ]
        assert b.core.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_escape_on_a_local_turn_gives_the_queued_prompts_back(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        b = await receiver(nursery, short_tmp, [[HANG], text("answer")])
        await b.tell(Prompt("first"))
        await b.next(TurnBegan)
        await b.tell(Prompt("second"), Prompt("third"))
        await b.next(Queued, lambda q: q.texts == ("second", "third"))
        await trio.testing.wait_all_tasks_blocked()
        await b.tell(CancelTurn())
        returned = await b.next(Returned)
        assert returned == Returned(("second", "third"))
        assert b.log[-2] == Queued(())
        await b.next(TurnEnded)
        assert (await b.next(Notice)).text == "Your queued prompts are back in the input."
        await trio.testing.wait_all_tasks_blocked()
        assert len(b.client.requests) == 1 and b.began() == [""]  # they did not run
        assert b.of(RelayStopped) == []
        nursery.cancel_scope.cancel()


async def test_escape_gives_prompts_back_and_names_a_queued_command_not_run(
    short_tmp: Path,
) -> None:
    # A queued /compact never comes back beside the prompts: sent with them, it would
    # reach the model as text.
    async with trio.open_nursery() as nursery:
        b = await receiver(nursery, short_tmp, [[HANG], text("answer")])
        await b.tell(Prompt("first"))
        await b.next(TurnBegan)
        compact = interpret("/compact")
        assert isinstance(compact, ParsedCommand)
        await b.tell(Prompt("second"), Command(compact, "/compact"), Prompt("third"))
        await b.next(Queued, lambda q: len(q.texts) == 3)
        await trio.testing.wait_all_tasks_blocked()
        await b.tell(CancelTurn())
        assert await b.next(Returned) == Returned(("second", "third"))
        await b.next(TurnEnded)
        assert (await b.next(Notice)).text == "Your queued prompts are back in the input."
        assert (await b.next(Notice)).text == "Not run: /compact; type it again to run it."
        await trio.testing.wait_all_tasks_blocked()
        assert len(b.client.requests) == 1
        nursery.cancel_scope.cancel()


async def test_a_prompt_that_never_reached_the_model_comes_back_and_is_not_resent(
    short_tmp: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        b = await receiver(nursery, short_tmp, [ModelError(UNREACHABLE), text("answer")])
        await b.tell(Prompt("lost one"), Prompt("queued one"))
        assert await b.next(Returned) == Returned(("lost one", "queued one"))
        await b.next(TurnEnded)
        notice = await b.next(Notice)
        assert notice.text == (
            "Your prompt and the queued ones are back in the input (the model did not get it)."
        )
        await trio.testing.wait_all_tasks_blocked()
        assert b.began() == [""] and len(b.client.requests) == 1  # the queued one never ran
        assert b.core.backend.agent.session.history == []
        # the user sends something else: the request holds that prompt alone
        await b.tell(Prompt("a new one"))
        await b.turns(1)
        (_, request) = b.client.requests
        assert [(m.role, m.content) for m in request.messages[1:]] == [("user", "a new one")]
        nursery.cancel_scope.cancel()


async def test_a_relayed_message_that_missed_the_model_runs_once_it_answers(
    short_tmp: Path,
) -> None:
    # The worker's own probe waits ``MODEL_RETRY`` (2 s first) and ``build_app`` passes
    # no ``model_retry``: the warm-up the UI asks for (WarmUpRequest) finds the model here.
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await receiver(nursery, short_tmp, [ModelError(UNREACHABLE)], warmup=True, down=True)
        assert (await b.next(ServerState)).problem != ""  # the start-up check: no warm-up
        assert await deliver(a, b, "rename users.name") == "accepted"
        await b.next(TurnEnded)
        assert b.began() == ["alpha"]
        backend = b.core.backend
        assert backend.inbox.status() == ("on", 1) and backend.inbox.waits_for_model()
        system = [e.text for e in b.entries() if e.role == "system"]
        assert system[-1].endswith(
            "did not reach the model: it stays first in the queue and runs when the model "
            "answers again."
        )
        assert await deliver(a, b, "second") == "accepted"
        await trio.testing.wait_all_tasks_blocked()
        assert b.began() == ["alpha"]  # nothing claimed while the model is down
        assert [u.task for u in backend.inbox.unrun()] == ["rename users.name", "second"]

        b.client.down = False
        b.client.replies = [text("done")]
        await b.tell(WarmUpRequest())
        await b.turns(2)
        assert b.began() == ["alpha", "alpha", "alpha"]
        # The failed attempt, the warm-up, the message again (not consumed), the next one.
        assert b.asked("rename users.name", "second") == [
            "rename users.name",
            WARM_UP,
            "rename users.name",
            "second",
        ]
        assert backend.inbox.status() == ("on", 0) and not backend.inbox.waits_for_model()
        first = sent_ids(a)[0]
        await reported(a, first, "completed")
        assert [e.meta["receipt"] for e in receipts(a) if e.meta["message_id"] == first] == [
            "started",
            "completed",
        ]
        nursery.cancel_scope.cancel()


async def test_the_probe_runs_a_message_that_missed_the_model_once_it_answers(
    short_tmp: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The probe's pauses (``MODEL_RETRY``) pass on a mock clock: no intent at all here.
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await receiver(nursery, short_tmp, [ModelError(UNREACHABLE)], down=True)
        await b.next(ServerState)
        assert await deliver(a, b, "rename users.name") == "accepted"
        await b.next(TurnEnded)
        assert b.core.backend.inbox.waits_for_model()
        checks = b.client.checks
        await trio.sleep(10)  # the probe checks and finds the server still down
        assert b.client.checks > checks
        assert b.began() == ["alpha"] and b.core.backend.inbox.waits_for_model()
        b.client.down = False
        b.client.replies = [text("done")]
        await b.next(TurnEnded)
        assert b.began() == ["alpha", "alpha"]
        assert b.asked("rename users.name") == ["rename users.name"] * 2
        assert b.core.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_the_manifest_says_busy_exactly_while_the_worker_runs_a_turn(
    short_tmp: Path,
) -> None:
    # The worker starts and ends every turn in one place; the manifest follows it.
    gate = Gate()
    async with trio.open_nursery() as nursery:
        b = await receiver(
            nursery, short_tmp, [tools(call("run_command", command="ls"))], approver=gate
        )
        a = await start(nursery, short_tmp, "alpha")

        async def state() -> str:
            peer = next(
                p for p in await a.backend.sends.discover() if p.manifest.instance_id == b.id
            )
            return peer.manifest.state

        assert await state() == "ready"
        await b.tell(Prompt("list the files"))
        with trio.fail_after(WAIT):
            await gate.asked.wait()
        assert await state() == "busy"  # a local turn, asking its user
        gate.release.set()
        await b.turns(1)
        assert await state() == "ready"
        nursery.cancel_scope.cancel()


async def test_an_idle_only_command_runs_in_the_workers_task_and_the_ui_only_draws(
    short_tmp: Path,
) -> None:
    # No round trip through the UI: the worker runs /rewind N itself, between turns, and
    # sends what it shows; a refusal is one error line.
    async with trio.open_nursery() as nursery:
        b = await receiver(nursery, short_tmp, [text("done")])
        parsed = interpret("/rewind x")
        assert isinstance(parsed, ParsedCommand)
        await b.tell(Prompt("first"), Command(parsed, "/rewind x"))
        notice = await b.next(Notice, lambda n: "/rewind" in n.text)
        assert notice == Notice("/rewind takes a turn's number, not 'x' (see /rewind)", "error")
        kinds = [type(e).__name__ for e in b.log]
        assert kinds.index("TurnEnded") < kinds.index("Notice")  # after the turn, not beside
        nursery.cancel_scope.cancel()
