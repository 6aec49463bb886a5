"""Idle-only commands are work items of the worker: they run between turns, in the order
typed, so a turn can never start under them (and they need no re-check)."""

from __future__ import annotations

import trio

from tests.ui.test_controller import FakeBackend, Harness, run
from zcoder.app.idle import IDLE
from zcoder.commands import COMMANDS
from zcoder.ui.slash import HANDLERS


def test_every_registered_command_runs_in_one_place() -> None:
    # The UI runs the listings and the reports; the worker the idle-only forms, in its own
    # task (app/idle.py): no idle-only command has a UI handler.
    names = {c.name for c in COMMANDS}
    assert set(HANDLERS) | IDLE == names
    assert {c.name for c in COMMANDS if c.idle_only or c.args_idle_only} <= IDLE
    assert not {c.name for c in COMMANDS if c.idle_only} & set(HANDLERS)


def test_a_relayed_message_that_arrives_first_runs_before_a_queued_new() -> None:
    backend = FakeBackend()
    backend.relay_gate = trio.Event()

    async def body(h: Harness) -> None:
        backend.relayed.append("from a peer")
        h.backend.changed()
        await h.until(lambda: h.backend.turns == ["relay: from a peer"])
        h.keys("/new\r")
        await h.until(lambda: h.queue == ["/new"])
        assert h.backend.new_sessions == 0  # not under the running turn
        assert backend.relay_gate is not None
        backend.relay_gate.set()
        await h.until(lambda: h.backend.new_sessions == 1)

    run(body, backend, warmup=False)


def test_a_switch_typed_before_a_relayed_message_runs_first_and_the_turn_waits() -> None:
    backend = FakeBackend()
    listed = trio.Event()
    release = trio.Event()
    original = backend.list_sessions

    async def slow_list() -> list:  # type: ignore[type-arg]
        listed.set()
        await release.wait()
        return await original()

    backend.list_sessions = slow_list  # type: ignore[method-assign]

    async def body(h: Harness) -> None:
        h.keys("/sessions 2\r")
        await listed.wait()
        backend.relayed.append("from a peer")
        h.backend.changed()
        h.keys("after\r")
        await trio.sleep(0.05)
        assert h.backend.turns == []  # nothing starts while the switch runs
        release.set()
        await h.until(lambda: len(h.backend.turns) == 2)
        # The switch first, then one relayed message, then the next typed prompt.
        assert h.backend.switched == ["s2"]
        assert h.backend.turns == ["relay: from a peer", "after"]
        h.backend.gate.set()

    run(body, backend, warmup=False)


def test_a_model_switch_waits_for_the_running_turn() -> None:
    async def body(h: Harness) -> None:
        h.keys("one\r")
        await h.until(lambda: h.terminal.turn_running)
        h.keys("/model other:2\r")
        await h.until(lambda: h.queue == ["/model other:2"])
        assert h.backend.model == "m:1"
        h.backend.gate.set()
        await h.until(lambda: h.backend.model == "other:2")
        await h.until(lambda: "Model set to other:2." in h.output)

    run(body, FakeBackend(), warmup=False)
