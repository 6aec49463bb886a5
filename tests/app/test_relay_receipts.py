"""Receipts, the outbox and cancel (zcoder's extension of version 1), as the app wires them:
real relay services on real sockets in one Trio run, each behind an ``AgentBackend`` with a
scripted model; a version-1-only peer in a process of its own."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from tests.agent.doubles import HANG, call, text, tools
from tests.app.test_relay_app import Instance, pair, send, start
from tests.relay.zsh_peer import ZshPeer
from zcoder.agent.turns import TurnOutcome
from zcoder.app.exit import _dropped_lines
from zcoder.app.relay.receipts import COMMANDS_NOTE, final_state
from zcoder.config import RelaySettings
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, ModelError
from zcoder.live import Entry, LiveEvent
from zcoder.relay import client
from zcoder.relay.envelope import Cancel, Receipt
from zcoder.relay.paths import ensure_relay_dir
from zcoder.relay.registry import load_manifest
from zcoder.ui.backend import Unrun
from zcoder.ui.render import render_event


async def until(check: Callable[[], bool]) -> None:
    with trio.fail_after(10):
        while not check():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def reported(a: Instance, message_id: str, state: str) -> None:
    """Until ``a`` shows the receipt ``state`` for ``message_id``."""

    def seen(event: LiveEvent) -> bool:
        meta = event.event.meta if isinstance(event, Entry) else {}
        return meta.get("receipt") == state and meta.get("message_id") == message_id

    with trio.fail_after(10):
        await a.sink.watch(seen).wait()


def state_of(a: Instance, message_id: str) -> str:
    sent = a.backend.sends.outbox.outbox.get(message_id)
    return sent.state if sent is not None else ""


def receipts(a: Instance) -> list[TranscriptEvent]:
    return [e for e in a.sink.entries() if e.role == "relay" and e.meta.get("receipt")]


def only_id(a: Instance) -> str:
    (sent,) = a.backend.sends.outbox.outbox.entries()
    return sent.message_id


async def test_a_task_comes_back_started_then_completed_with_answer_and_paths(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        b.approver.answers = ["y", "y"]
        assert await send(a, b, "rename users.name\nmore detail") == "accepted"
        mid = only_id(a)
        b.client.replies = [
            tools(call("write_file", path="notes.md", content="renamed\n")),
            tools(call("run_command", command="true")),
            text("Renamed users.name to users.full_name.\nAll tests pass."),
        ]
        assert await b.backend.runner.run_relay_turn()
        await reported(a, mid, "completed")
        # The command's question: the sender is told its task waits, then goes on.
        started, waiting, going_on, completed = receipts(a)
        who = f"beta (pid {os.getpid()})"
        assert started.meta["headline"] == f'⇄ {who} started your message #1 "rename users.name"'
        assert waiting.meta["headline"] == (
            f'⇄ {who} waits on your message #1 "rename users.name": asks its user to approve: true'
        )
        assert going_on.meta["headline"] == (
            f'⇄ {who} goes on with your message #1 "rename users.name": its user approved'
        )
        assert (
            completed.meta["headline"] == f'⇄ {who} completed your message #1 "rename users.name"'
        )
        # The answer is shown once: in the body, not in the headline too.
        assert completed.text.startswith("Renamed users.name to users.full_name.\nAll tests pass.")
        # The turn's checkpoint saw what the command changed (nothing): no guess about it.
        assert "Changed: notes.md" in completed.text and COMMANDS_NOTE not in completed.text
        # Persisted in the session, so shown again on resume; never a model turn.
        assert completed in a.backend.agent.session.events
        assert a.client.requests == []
        (line,) = a.backend.relay_sent()
        assert f"{mid} → {who} · completed ·" in line and "rename users.name" in line
        status = a.backend.sends.outbox.status_text(mid)
        assert status is not None and '"state": "completed"' in status
        assert '"changed": ["notes.md"]' in status


async def test_a_receipt_names_the_files_a_relayed_command_changed(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        (short_tmp / "beta" / "old.txt").write_text("old\n")
        b.approver.answers = ["y"]
        assert await send(a, b, "tidy up") == "accepted"
        mid = only_id(a)
        b.client.replies = [
            tools(call("run_command", command="echo new > made.txt; rm old.txt")),
            text("Tidied."),
        ]
        assert await b.backend.runner.run_relay_turn()
        await reported(a, mid, "completed")
        completed = receipts(a)[-1]
        assert "Changed: made.txt, old.txt" in completed.text
        assert COMMANDS_NOTE not in completed.text


async def test_started_goes_out_only_once_the_turn_reached_the_model(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "when the model is up") == "accepted"
        mid = only_id(a)
        b.client.replies = [ModelError("cannot connect to the model server")]
        assert await b.backend.runner.run_relay_turn()
        await b.backend.relay.receipts.flush(5.0)
        assert receipts(a) == [] and state_of(a, mid) == "accepted"  # it only waits
        assert b.backend.inbox.status() == ("on", 1)  # first in the queue again
        b.client.replies = [text("done")]
        b.backend.inbox.inbound.model_answered()  # as a check that finds the model up does
        assert await b.backend.runner.run_relay_turn()
        await reported(a, mid, "completed")
        assert [e.meta["receipt"] for e in receipts(a)] == ["started", "completed"]


async def test_a_message_that_cannot_be_put_back_is_reported_dropped(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "when the model is up") == "accepted"
        mid = only_id(a)
        spool = b.backend.relay.service.spool if b.backend.relay.service else None
        assert spool is not None

        def unclaim(claimed: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(spool, "unclaim", unclaim)
        b.client.replies = [ModelError("cannot connect to the model server")]
        assert await b.backend.runner.run_relay_turn()
        await reported(a, mid, "dropped")
        assert "No space left on device" in receipts(a)[-1].meta["headline"]
        assert b.backend.inbox.status() == ("on", 0)  # settled: it never runs twice


async def test_escape_on_the_receiver_gives_cancelled(short_tmp: Path) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "long task") == "accepted"
        mid = only_id(a)
        b.client.replies = [[HANG]]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(b.backend.runner.run_relay_turn)
            await reported(a, mid, "started")
            await until(b.backend.runner.cancel_turn)
        await reported(a, mid, "cancelled")
        headline = receipts(a)[-1].meta["headline"]
        assert headline.endswith(
            'cancelled your message #1 "long task": stopped by the receiver\'s user'
        )


async def test_the_receiver_leaving_with_the_message_queued_gives_dropped(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "later") == "accepted"
        mid = only_id(a)
        b.backend.runner.sync_relay()  # the worker's last sync, on the way out
        await b.backend.relay_farewell()
        assert state_of(a, mid) == "dropped"
        assert b.backend.relay.receipts.stats.delivered == 1


async def test_on_the_way_out_intake_closes_before_the_list_and_no_claim_follows(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "in time") == "accepted"
        b.backend.relay.close_intake()
        assert await send(a, b, "too late") == "paused"  # not acked and then lost
        assert [u.task for u in b.backend.inbox.unrun()] == ["in time"]
        assert b.backend.runner.claim_relay() is None and not b.backend.runner.relay_runnable()
        assert await b.backend.relay_farewell()
        assert state_of(a, only_id(a)) == "dropped"


async def test_a_farewell_after_the_receipts_were_cancelled_promises_nothing(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert await send(a, b, "later") == "accepted"
        with trio.CancelScope() as scope:
            scope.cancel()  # as a cancel of the root takes the receipts' task with it
            assert not await b.backend.relay_farewell()
        assert b.backend.relay.receipts.stats.queued == 0
        assert state_of(a, only_id(a)) == "accepted"
    unrun = [Unrun("m1", "alpha (pid 7)", "later")]
    assert "(their senders were not told):" in _dropped_lines(unrun, told=False, width=200)
    assert "(zcoder senders get a dropped receipt):" in _dropped_lines(unrun, told=True, width=200)
    # At 80 columns it wraps at a word, never in one ("droppe / d"), and the items start
    # at the left edge.
    assert _dropped_lines(unrun, told=True, width=80) == (
        "Dropped 1 accepted relayed message that had not run (zcoder senders get a\n"
        "  dropped receipt):\n"
        "- from alpha (pid 7): later\n"
    )


async def test_cancel_withdraws_a_queued_message_and_is_too_late_for_a_running_one(
    short_tmp: Path,
) -> None:
    async with pair(short_tmp) as (a, b):
        assert [await send(a, b, m) for m in ("first", "second")] == ["accepted"] * 2
        first, second = (s.message_id for s in a.backend.sends.outbox.outbox.entries())
        b.client.replies = [[HANG]]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(b.backend.runner.run_relay_turn)
            await reported(a, first, "started")
            line = await a.backend.relay_cancel("2")  # its number in /agents sent
            assert line.startswith(f"Withdrawn: beta (pid {os.getpid()}) removed message {second}")
            assert state_of(a, second) == "cancelled"
            assert b.backend.inbox.status() == ("on", 0)  # not waiting any more
            line = await a.backend.relay_cancel(first)
            assert line.startswith("Too late:")
            with pytest.raises(CommandError, match="already cancelled"):
                await a.backend.relay_cancel(second)
            with pytest.raises(CommandError, match="no message 'nope'"):
                await a.backend.relay_cancel("nope")
            b.backend.runner.cancel_turn()
        withdrawn = [e for e in b.sink.entries() if "withdrawn by its sender" in e.text]
        assert len(withdrawn) == 1


async def test_a_held_then_denied_message_is_reported_to_its_sender(short_tmp: Path) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        settings = RelaySettings(dir=short_tmp / "agents", inbound="hold")
        b = await start(nursery, short_tmp, "beta", relay=settings)
        assert await send(a, b, "please wait") == "accepted"
        mid = only_id(a)
        await reported(a, mid, "held")
        assert (
            receipts(a)[-1]
            .meta["headline"]
            .endswith(
                'holds your message #1 "please wait" for its user: it holds every relayed message'
            )
        )
        b.backend.runner.relay_control("deny 1")
        await reported(a, mid, "denied")
        assert state_of(a, mid) == "denied"
        nursery.cancel_scope.cancel()


def _receipt(sender: Instance, target: Instance, message_id: str, state: str) -> Receipt:
    return Receipt(
        protocol=1,
        type="receipt",
        message_id=message_id,
        target_instance_id=target.id,
        sender_instance_id=sender.id,
        sender_pid=os.getpid(),
        state=state,
        detail="forged",
        changed="",
        created_at=int(time.time()),
    )


async def test_a_receipt_counts_only_from_the_instance_the_message_went_to(
    short_tmp: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta")
        c = await start(nursery, short_tmp, "gamma")
        assert await send(a, b, "task") == "accepted"
        mid = only_id(a)
        socket = Path(load_manifest(short_tmp / "agents", a.id).socket)

        async def deliver(request: Receipt | Cancel) -> str:
            ack = await client.request(socket, request, io_timeout=2.0)
            return ack.status

        assert await deliver(_receipt(c, a, mid, "completed")) == "invalid"  # not sent to c
        assert await deliver(_receipt(b, a, f"{a.id}-999", "completed")) == "invalid"  # unsent
        assert state_of(a, mid) == "accepted"
        assert await deliver(_receipt(b, a, mid, "completed")) == "accepted"
        assert await deliver(_receipt(b, a, mid, "started")) == "accepted"  # no step back
        assert state_of(a, mid) == "completed" and len(receipts(a)) == 1
        # Only the sender cancels its own message: a cancel names its sender in the id.
        with pytest.raises(ValueError, match="message_id does not start with sender"):
            Cancel(1, "cancel", mid, b.id, c.id, os.getpid(), int(time.time()))
        cancel = Cancel(1, "cancel", f"{c.id}-1", b.id, c.id, os.getpid(), int(time.time()))
        b_socket = Path(load_manifest(short_tmp / "agents", b.id).socket)
        ack = await client.request(b_socket, cancel, io_timeout=2.0)
        assert ack.status == "unknown" and b.backend.inbox.status() == ("on", 1)
        nursery.cancel_scope.cancel()


async def test_a_version_1_peer_still_gets_tasks_and_sends_no_receipts(short_tmp: Path) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    with ZshPeer(relay_dir, project="digest-zsh") as zsh:
        async with trio.open_nursery() as nursery:
            a = await start(nursery, short_tmp, "alpha")
            peer = next(p for p in await a.backend.sends.discover() if p.manifest.project)
            ack = await a.backend.sends.deliver(peer, "weekly digest")
            assert ack.status == "accepted" and ack.receipts is None
            (line,) = a.backend.relay_sent()
            assert "· accepted (this peer sends no receipts) ·" in line
            # A receipt to a version-1 peer is answered unsupported, and then never sent.
            sender = a.backend.relay.receipts
            forged = Cancel(1, "cancel", f"{zsh.instance_id}-1", a.id, zsh.instance_id, zsh.pid, 0)
            sender.send(forged, "started")
            await sender.flush(5.0)
            assert sender.stats.unsupported == 1
            sender.send(forged, "completed", "done")
            await sender.flush(5.0)
            answers = [answer for _, answer in zsh.requests() if answer != "pong"]
            assert answers == ["accepted", "unsupported"]
            nursery.cancel_scope.cancel()


def test_a_receipt_entry_is_drawn_again_from_the_session_as_it_was_shown() -> None:
    event = TranscriptEvent(
        role="relay",
        text="Renamed it.\nChanged: a.py",
        meta={"receipt": "completed", "headline": "⇄ beta (pid 7) completed your message: x"},
    )
    drawn = "".join(part[1] for part in render_event(event, width=80))
    assert drawn.startswith("⇄ beta (pid 7) completed your message: x\n")
    assert "  │ Renamed it.\n  │ Changed: a.py" in drawn
    assert "relayed from" not in drawn  # not a relayed task's header
    started = TranscriptEvent(role="relay", text="", meta={"receipt": "started", "headline": "h"})
    assert "".join(part[1] for part in render_event(started)) == "h\n"


async def test_a_received_receipt_touches_neither_the_session_nor_the_ui_in_the_listener(
    short_tmp: Path,
) -> None:
    # The listener (relay/extension.py) only takes the receipt and notes a change: no code
    # of the app runs in its stack; the worker's sync records it.
    from tests.app.test_relay_accept_path import calls_from_the_listener

    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha", follow=False)
        b = await start(nursery, short_tmp, "beta")
        assert await send(a, b, "task") == "accepted"
        mid = only_id(a)
        socket = Path(load_manifest(short_tmp / "agents", a.id).socket)
        events_before = len(a.backend.agent.session.events)
        with calls_from_the_listener() as called:
            ack = await client.request(socket, _receipt(b, a, mid, "completed"), io_timeout=2.0)
        assert ack.status == "accepted"
        assert called == [], called
        assert len(a.backend.agent.session.events) == events_before  # not yet recorded
        a.backend.runner.sync_relay()  # what the worker does once it wakes
        assert receipts(a)[-1].meta["receipt"] == "completed"
        assert len(a.backend.agent.session.events) == events_before + 1
        nursery.cancel_scope.cancel()


def test_an_answer_cut_at_the_output_limit_is_completed_and_says_it_was_cut() -> None:
    cut = TurnOutcome("cut_off", text="The first half of", error="The reply was cut off: ...")
    assert final_state(cut) == ("completed", "(cut off at the output limit) The first half of")
