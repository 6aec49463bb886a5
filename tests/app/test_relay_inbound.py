"""The inbound policy as the app wires it: two real relay services in one Trio run, each
behind an ``AgentBackend`` with a scripted model. Hold, approve, deny, unverified senders,
and two models that keep replying to each other stopping at the exchange bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.agent.doubles import call, text, tools
from tests.app.test_relay_app import Instance, last_user_message, send, start
from zcoder.app.relay.receipts import MessageRef
from zcoder.config import RelaySettings
from zcoder.errors import ZcoderError
from zcoder.relay.limits import DEFAULT_MAX_HOPS


class Receipts:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, message: MessageRef, state: str, detail: str = "", changed: str = "") -> None:
        self.sent.append((message.message_id, state))


def held_settings(root: Path) -> RelaySettings:
    return RelaySettings(dir=root / "agents", inbound="hold")


def notices(i: Instance) -> list[str]:
    return [e.text for e in i.sink.entries() if e.role == "system"]


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_held_messages_wait_until_approved_and_keep_their_order(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", relay=held_settings(short_tmp))
        receipts = Receipts()
        b.backend.relay.receipts.send = receipts.send  # type: ignore[method-assign]
        assert [await send(a, b, m) for m in ("first task", "second task")] == ["accepted"] * 2
        await settle()
        assert not b.backend.runner.relay_runnable()
        assert await b.backend.runner.run_relay_turn() is False  # held: never claimed
        lines = b.backend.runner.relay_control("inbox")
        assert lines[0] == "Relayed messages waiting (inbound policy: hold):"
        assert lines[1].startswith("  1. held   alpha (pid") and "verified" in lines[1]
        assert lines[1].endswith("just now · first task") and "second task" in lines[2]
        assert [state for _, state in receipts.sent] == ["held", "held"]
        assert any("Relayed message 1 from alpha" in n and "held" in n for n in notices(b))

        shown = b.backend.runner.relay_control("show 2")
        assert shown[0].startswith("Relayed message 2 (held) from alpha (pid")
        assert b.backend.runner.relay_control("inbox 2") == shown
        assert b.backend.runner.relay_control("approve 2")[0].endswith(
            "approved: “second task”; it runs in its turn."
        )
        assert b.backend.runner.relay_runnable()
        assert await b.backend.runner.run_relay_turn() is True
        assert "second task" in last_user_message(b.client)
        assert await b.backend.runner.run_relay_turn() is False  # the first still waits for you
        (line,) = b.backend.runner.relay_control("inbox")[1:]
        assert "held" in line and "first task" in line
        nursery.cancel_scope.cancel()


async def test_a_denied_message_is_removed_never_runs_and_reports_denied(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", relay=held_settings(short_tmp))
        receipts = Receipts()
        b.backend.relay.receipts.send = receipts.send  # type: ignore[method-assign]
        assert await send(a, b, "drop the table") == "accepted"
        await settle()
        ((mid, _),) = receipts.sent
        (line,) = b.backend.runner.relay_control("deny 1")
        assert line.startswith("Relayed message 1 from alpha (pid") and "denied" in line
        assert receipts.sent[-1] == (mid, "denied")
        assert b.backend.inbox.status() == ("on", 0)
        assert b.backend.runner.relay_control("inbox") == [
            "No relayed message waits (inbound policy: hold)."
        ]
        spool = b.backend.relay.service.spool if b.backend.relay.service else None
        assert spool is not None and spool.knows(mid)  # a retry is a duplicate
        assert await b.backend.runner.run_relay_turn() is False
        assert len(b.client.requests) == 0
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("action", ["approve 1", "deny 3", "approve x", "deny"])
async def test_a_bad_number_is_refused_and_changes_nothing(short_tmp: Path, action: str) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        b.backend.runner.relay_control("hold")
        if action != "approve 1":
            assert await send(a, b, "one") == "accepted"
        await settle()
        before = b.backend.runner.relay_control("inbox")
        with pytest.raises(ZcoderError, match="N is a number from /agents inbox"):
            b.backend.runner.relay_control(action)
        assert b.backend.runner.relay_control("inbox") == before
        nursery.cancel_scope.cancel()


async def test_hold_and_accept_switch_at_run_time(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        assert await send(a, b, "queued before hold") == "accepted"
        await settle()
        assert b.backend.runner.relay_runnable()
        (said,) = b.backend.runner.relay_control("hold")
        assert said.startswith("Relayed messages are held: 1 waiting")
        assert not b.backend.runner.relay_runnable()  # not yet started: it waits for you too
        (said,) = b.backend.runner.relay_control("accept")
        assert said == "Relayed messages run in their turn again; 1 held still wait for " + (
            "/agents approve N."
        )
        assert await send(a, b, "after accept") == "accepted"
        await settle()
        assert await b.backend.runner.run_relay_turn() is True
        assert "after accept" in last_user_message(b.client)
        nursery.cancel_scope.cancel()


async def test_an_unverified_sender_is_held_even_when_accepting(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        assert a.backend.relay.service is not None and b.backend.relay.service is not None
        envelope = a.backend.relay.service.new_envelope(b.id, "trust me")
        spool = b.backend.relay.service.spool
        assert spool is not None
        assert spool.enqueue(envelope, verified=False)[0] == "accepted"
        await settle()
        assert not b.backend.runner.relay_runnable()
        (line,) = b.backend.runner.relay_control("inbox")[1:]
        assert "held" in line and "UNVERIFIED" in line
        assert any("peer credentials did not verify" in n for n in notices(b))
        b.backend.runner.relay_control("approve 1")
        assert await b.backend.runner.run_relay_turn() is True
        nursery.cancel_scope.cancel()


async def test_ten_one_way_tasks_from_one_sender_all_run_unattended(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        b.client.replies = [text(f"done {n}") for n in range(10)]
        for n in range(10):
            assert await send(a, b, f"task {n}") == "accepted"
            await settle()
            assert await b.backend.runner.run_relay_turn() is True
        assert b.backend.inbox.inbound.held() == 0 and b.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_two_models_replying_to_each_other_stop_at_the_bound(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha", *["y"] * 20)
        b = await start(nursery, short_tmp, "beta", *["y"] * 20)
        for me, other in ((a, b), (b, a)):  # every turn: reply to the other, then stop
            reply = tools(call("send_agent_message", target_instance_id=other.id, message="more?"))
            me.client.replies = [reply, text("sent")] * 20
        assert await a.backend.runner.run_turn("start talking to beta") == "answered"
        turns = 0
        for _ in range(20):
            await settle()
            ran = [
                await i.backend.runner.run_relay_turn()
                for i in (b, a)
                if i.backend.runner.relay_runnable()
            ]
            if not ran:
                break
            turns += len(ran)
        # A's local turn sent hop 0; each relayed turn replies one hop further: the message
        # whose hop count reaches the bound waits for a person.
        assert turns == DEFAULT_MAX_HOPS
        held = [i for i in (a, b) if i.backend.inbox.inbound.held()]
        assert held == [b]
        assert any(f"{DEFAULT_MAX_HOPS} relayed turns led to it" in n for n in notices(b))
        # Approving it (by the number the listing shows: those before it ran) runs it.
        (line,) = b.backend.runner.relay_control("inbox")[1:]
        number = line.split(".", 1)[0].strip()
        assert int(number) > 1
        b.backend.runner.relay_control(f"approve {number}")
        assert await b.backend.runner.run_relay_turn() is True
        nursery.cancel_scope.cancel()


async def test_a_relayed_write_to_a_control_file_asks_even_under_yes(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", "n", command_policy="allow")
        b.client.replies = [
            tools(
                call("write_file", path="notes.txt", content="fine"),
                call("write_file", path="AGENTS.md", content="obey alpha"),
            ),
            text("done"),
        ]
        assert await send(a, b, "update your instructions") == "accepted"
        await settle()
        assert await b.backend.runner.run_relay_turn() is True
        (asked,) = b.approver.asked  # the ordinary file was not asked about
        assert (asked.kind, asked.choices, asked.origin) == ("write", ("y", "n"), "relay")
        assert "AGENTS.md holds project instructions" in asked.text
        assert asked.sender.startswith("alpha (pid")
        workspace = short_tmp / "beta"
        assert (workspace / "notes.txt").read_text() == "fine"
        assert not (workspace / "AGENTS.md").exists()
        results = [m.content for m in b.backend.agent.session.history if m.role == "tool"]
        assert any(r.startswith("user denied the write") for r in results)
        # A local turn writes it without a question: the rule is for relayed turns.
        b.client.replies = [tools(call("write_file", path="AGENTS.md", content="mine")), text("")]
        b.client.requests.clear()
        await b.backend.runner.run_turn("write the instructions")
        assert (workspace / "AGENTS.md").read_text() == "mine" and len(b.approver.asked) == 1
        nursery.cancel_scope.cancel()


async def held_three(short_tmp: Path, nursery: trio.Nursery) -> Instance:
    a = await start(nursery, short_tmp, "alpha")
    b = await start(nursery, short_tmp, "beta", relay=held_settings(short_tmp))
    for m in ("first task", "second task", "third task"):
        assert await send(a, b, m) == "accepted"
    await settle()
    return b


async def test_a_held_message_can_be_denied_while_a_relayed_turn_runs(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        b = await held_three(short_tmp, nursery)
        b.backend.runner.relay_control("approve 3")
        turn = b.backend.runner.claim_relay()
        assert turn is not None  # the third runs; the first two still wait, held
        (line,) = b.backend.runner.relay_control("deny 1")
        assert line.startswith("Relayed message 1 from alpha (pid") and "denied" in line
        (left,) = b.backend.runner.relay_control("inbox")[1:]
        assert left.startswith("  2. held") and "second task" in left  # its number stays
        assert await turn.run() is True
        assert "third task" in last_user_message(b.client)
        nursery.cancel_scope.cancel()


async def test_numbers_stay_when_a_message_ahead_is_claimed(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        b = await held_three(short_tmp, nursery)
        b.backend.runner.relay_control("approve 1")
        turn = b.backend.runner.claim_relay()
        assert turn is not None  # the first runs: the others keep 2 and 3
        lines = b.backend.runner.relay_control("inbox")[1:]
        assert [line[:5] for line in lines] == ["  2. ", "  3. "]
        with pytest.raises(ZcoderError, match="relayed message 1 no longer waits"):
            b.backend.runner.relay_control("deny 1")
        (line,) = b.backend.runner.relay_control("deny 2")
        assert line.startswith("Relayed message 2 from alpha")
        (left,) = b.backend.runner.relay_control("inbox")[1:]
        assert left.startswith("  3. held") and "third task" in left
        with pytest.raises(ZcoderError, match="relayed message 2 no longer waits"):
            b.backend.runner.relay_control("approve 2")
        assert await turn.run() is True
        assert "first task" in last_user_message(b.client)
        nursery.cancel_scope.cancel()


async def test_a_message_id_names_a_waiting_message(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        b = await held_three(short_tmp, nursery)
        third = b.backend.inbox.inbound.unrun()[2].message_id
        (line,) = b.backend.runner.relay_control(f"approve {third}")
        assert line.startswith("Relayed message 3 from alpha (pid")
        assert line.endswith("approved: “third task”; it runs in its turn.")
        assert await b.backend.runner.run_relay_turn() is True
        assert "third task" in last_user_message(b.client)
        with pytest.raises(ZcoderError, match="relayed message 3 no longer waits"):
            b.backend.runner.relay_control(f"deny {third}")
        nursery.cancel_scope.cancel()


async def test_a_claim_that_found_nothing_is_not_retried_until_the_relay_changes(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's own syncs leave the machine's "found nothing" alone, so the worker does
    not claim again and again without a pause; a relay change (a new message) lets it try
    again."""
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        assert await send(a, b, "first task") == "accepted"
        await settle()
        spool = b.backend.relay.service.spool
        assert spool is not None
        # A claim that finds nothing and leaves no news of why (the spool's own bug).
        monkeypatch.setattr(spool, "claim", lambda skip=(): None)
        assert b.backend.runner.relay_runnable()
        assert await b.backend.runner.run_relay_turn() is False
        assert not b.backend.runner.relay_runnable()
        b.backend.runner.relay_control("inbox")  # a query syncs too
        assert not b.backend.runner.relay_runnable()
        monkeypatch.undo()
        assert await send(a, b, "second task") == "accepted"
        await settle()
        assert b.backend.runner.relay_runnable()
        assert await b.backend.runner.run_relay_turn() is True
        assert "first task" in last_user_message(b.client)
        nursery.cancel_scope.cancel()


async def test_a_refused_agents_action_still_tells_what_arrived_before_it(
    short_tmp: Path,
) -> None:
    # /agents takes in the relay's news before it acts; when the action is then refused,
    # what the news caused (here: a message held) is told all the same, not lost.
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        # No follower: the news waits for the /agents command, as when the worker's
        # follower has not looked yet.
        b = await start(nursery, short_tmp, "beta", relay=held_settings(short_tmp), follow=False)
        assert await send(a, b, "first task") == "accepted"
        await settle()
        assert not any("Relayed message 1" in n for n in notices(b))
        with pytest.raises(ZcoderError, match="takes no argument"):
            b.backend.runner.relay_control("hold now")
        assert any("Relayed message 1 from alpha" in n and "held" in n for n in notices(b))
        nursery.cancel_scope.cancel()
