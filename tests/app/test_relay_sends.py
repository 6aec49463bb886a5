"""What the user and the model are told about a send, with real relay services: a refusal
is never a success, and a send that cannot go is refused before its question."""

from __future__ import annotations

import os
from pathlib import Path

import trio
import trio.testing

from tests.agent.doubles import HANG, call, text, tools
from tests.app.test_relay_app import Instance, pair, start, worker_turn
from zcoder.config import RelaySettings
from zcoder.live import ToolUpdate

SEND = "send_agent_message"


def send_cards(instance: Instance) -> list[ToolUpdate]:
    return [e for e in instance.sink.events if isinstance(e, ToolUpdate) and e.name == SEND]


def send_results(instance: Instance) -> list[str]:
    history = instance.backend.agent.session.history
    return [m.content for m in history if m.role == "tool" and m.tool_name == SEND]


async def model_sends(a: Instance, *calls: tuple[str, str]) -> None:
    """A's model makes each send in its own step, then answers."""
    steps = [tools(call(SEND, target_instance_id=t, message=m)) for t, m in calls]
    a.client.replies = [*steps, text("done")]
    a.client.requests.clear()  # the script is indexed by the request count
    assert await a.backend.runner.run_turn("tell the others") == "answered"


async def test_a_paused_receiver_s_refusal_is_shown_and_told_as_not_delivered(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp, "y") as (a, b):
        b.backend.runner.relay_control("pause")
        await model_sends(a, (b.id, "refused task"))
        why = "beta is paused: it refuses new messages until it is resumed"
        (result,) = send_results(a)
        assert result.startswith(f"Error: not delivered: {why}.\n")
        card = send_cards(a)[-1]
        assert (card.state, card.summary) == ("undelivered", why)
        assert card.target == f"beta (pid {os.getpid()}) · {b.id}"
        (entry,) = [e for e in a.sink.entries() if e.meta.get("name") == SEND]
        assert (entry.meta["state"], entry.text) == ("undelivered", why)
        assert b.backend.inbox.status() == ("paused", 0)  # nothing was stored
        # Drawn again from the session (a resume, /sessions N): still not delivered.
        (saved,) = [e for e in a.backend.session_events() if e.meta.get("name") == SEND]
        assert saved.meta["state"] == "undelivered"


async def test_a_send_that_cannot_go_is_refused_without_a_question(short_tmp: Path) -> None:
    small = RelaySettings(dir=short_tmp / "agents", max_message_chars=20)
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha", "y", relay=small)
        b = await start(nursery, short_tmp, "beta")
        async with trio.open_nursery() as gone:  # an instance that was live and has exited
            c = await start(gone, short_tmp, "gamma")
            dead = c.id
            gone.cancel_scope.cancel()
        await model_sends(
            a,
            ("beta", "by project name"),
            (str(os.getpid()), "by pid"),
            (b.id[:-2], "by a prefix"),
            (f" {b.id}", "with a space"),
            (dead, "to a dead instance"),
            (b.id, "x" * 21),
        )
        assert a.approver.asked == []  # not one question
        results = send_results(a)
        assert len(results) == 6
        for result in results[:5]:
            assert result.startswith("Error: ") and b.id in result  # the live ids are listed
            assert dead not in result.replace(f"{dead!r}", "")
        assert "is not an exact instance id" in results[0]
        assert results[4].startswith(f"Error: no live zcoder instance has id '{dead}'")
        assert results[5] == (
            "Error: message is 21 characters; the limit is 20 (ZCODER_RELAY_MAX_MESSAGE_CHARS)"
            ": send a shorter, self-contained task"
        )
        assert [card.state for card in send_cards(a) if card.state != "pending"] == [
            "undelivered"
        ] * 6
        assert b.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_a_blank_message_is_refused_without_a_question(short_tmp: Path) -> None:
    async with pair(short_tmp, "y") as (a, b):
        await model_sends(a, (b.id, " \n\t "))
        assert a.approver.asked == []
        assert send_results(a) == ["Error: message is empty: send a self-contained task"]


async def test_the_question_shows_the_state_a_fresh_ping_found(short_tmp: Path) -> None:
    async with pair(short_tmp, "n", "n") as (a, b):
        b.backend.runner.relay_control("pause")
        await model_sends(a, (b.id, "while paused"))
        b.backend.runner.relay_control("resume")
        b.client.replies = [[HANG]]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker_turn, b.backend, "a long local task")
            await trio.testing.wait_all_tasks_blocked()
            await model_sends(a, (b.id, "while busy"))
            b.backend.runner.cancel_turn()
        paused, busy = (asked.target for asked in a.approver.asked)
        where = f"beta (pid {os.getpid()}, {short_tmp / 'beta'}) · {b.id}"
        assert paused == f"{where} · paused: it will refuse the message unless it is resumed first"
        assert busy == f"{where} · busy: the message waits until its current turn ends"
        assert [card.state for card in send_cards(a)][-1] == "denied"
