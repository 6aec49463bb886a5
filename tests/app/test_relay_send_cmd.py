"""``/send`` through the app with real relay services: no model, no question, the model's
acks and cards; targets by label; ``--agent-name`` as the label other instances see."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.app.test_relay_app import Instance, pair, start
from zcoder.app.relay.send import PeerRefresh
from zcoder.config import RelaySettings
from zcoder.errors import ZcoderError
from zcoder.relay.registry import Peer
from zcoder.relay.spool.store import Spool


def cards(instance: Instance) -> list[tuple[str, str, str]]:
    """The ``/send`` cards shown: (target, state, summary)."""
    return [
        (e.meta["target"], e.meta["state"], e.text)
        for e in instance.sink.entries()
        if e.role == "tool" and e.meta.get("name") == "/send"
    ]


def queued(instance: Instance) -> list[str]:
    service = instance.backend.relay.service
    assert service is not None and service.spool is not None
    spool: Spool = service.spool
    return [claimed.envelope.body for claimed in iter(spool.claim, None)]


async def test_send_by_label_delivers_without_a_model_or_a_question(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        await a.backend.send_message("@beta run the tests\nand fix what fails")
        label = f"beta (pid {os.getpid()}) · {b.id}"
        assert cards(a) == [
            (label, "delivered", f"#1 accepted (queue position 1) by beta (pid {os.getpid()})")
        ]
        assert a.client.requests == [] and a.approver.asked == []  # no turn, no question
        assert a.backend.agent.session.history == []  # the model did not send it
        (kept,) = [e for e in a.backend.agent.session.events if e.role == "tool"]
        assert kept.meta["name"] == "/send"  # kept with the session, shown on resume
        assert kept.meta["to"] == b.id and kept.meta["first_line"] == "run the tests"
        (line,) = a.backend.relay_sent()
        assert line.startswith(f"  1. {kept.meta['message_id']} → beta (pid {os.getpid()})")
        assert b.backend.inbox.status() == ("on", 1)
        assert queued(b) == ["run the tests\nand fix what fails"]


async def test_send_by_exact_id_and_bare_label(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        await a.backend.send_message(f"{b.id} one")
        await a.backend.send_message("BETA two")
        assert [state for _, state, _ in cards(a)] == ["delivered", "delivered"]
        assert queued(b) == ["one", "two"]


async def test_a_refused_send_is_a_not_delivered_card(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        b.backend.runner.relay_control("pause")
        await a.backend.send_message("@beta anything")
        why = "beta is paused: it refuses new messages until it is resumed"
        ((_, state, summary),) = cards(a)
        assert (state, summary) == ("undelivered", why)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("@beta", "usage: /send TARGET TEXT"),
        ("", "usage: /send TARGET TEXT"),
        ("@nobody hello", "no live instance has the id or name '@nobody'. Live instances: @beta"),
        ("@beta " + "x" * 30, "message is 30 characters; the limit is 20"),
    ],
)
async def test_bad_sends_are_refused_and_send_nothing(
    short_tmp: Path, args: str, error: str
) -> None:
    small = RelaySettings(dir=short_tmp / "agents", max_message_chars=20)
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha", relay=small)
        b = await start(nursery, short_tmp, "beta")
        with pytest.raises(ZcoderError) as err:
            await a.backend.send_message(args)
        assert error in str(err.value)
        assert cards(a) == [] and b.backend.inbox.status() == ("on", 0)
        nursery.cancel_scope.cancel()


async def test_agent_names_label_instances_and_a_shared_one_is_ambiguous(
    short_tmp: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", agent_name="reviewer")
        c = await start(nursery, short_tmp, "gamma", agent_name="reviewer")
        d = await start(nursery, short_tmp, "delta", agent_name="docs.writer")
        projects = {
            p.manifest.instance_id: p.manifest.project for p in await a.backend.sends.discover()
        }
        assert projects == {b.id: "reviewer", c.id: "reviewer", d.id: "docs.writer"}
        assert any("reviewer" in line for line in await a.backend.list_agents())
        with pytest.raises(ZcoderError) as err:
            await a.backend.send_message("@reviewer look")
        text = str(err.value)
        assert "2 live instances are named @reviewer" in text and b.id in text and c.id in text
        assert b.backend.inbox.status() == c.backend.inbox.status() == ("on", 0)
        await a.backend.send_message("@docs.writer document it")
        assert queued(d) == ["document it"]
        # Tab offers the last discovery: the unique label, the ids of the shared one.
        assert a.backend.send_targets() == ["@docs.writer", *sorted([b.id, c.id])]
        nursery.cancel_scope.cancel()


async def test_send_with_the_relay_off_says_why(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        assert a.backend.relay.service is not None
        a.backend.relay.service.health.fail("test: the relay broke")
        with pytest.raises(ZcoderError, match="/send: the relay is not running in this instance"):
            await a.backend.send_message("@beta hello")
        nursery.cancel_scope.cancel()


async def test_the_peer_refresh_discovers_when_asked(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        assert a.backend.send_targets() == []  # nothing discovered yet
        done = trio.Event()

        async def discover() -> list[Peer]:
            peers = await a.backend.sends.discover()  # what the backend's refresh calls
            done.set()
            return peers

        refresh = PeerRefresh(discover, min_interval=0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(refresh.run)
            refresh.ask()
            with trio.fail_after(10):
                await done.wait()
            nursery.cancel_scope.cancel()
        assert a.backend.send_targets() == ["@beta"]
        assert b.id in a.backend.sends.label(b.id)
