"""Idle-only commands and turns that start between the command's check and its run.

``submit`` checks ``turn_active`` and starts the command as a task; the worker may start a
turn (a relayed message, a queued prompt) before that task runs. The command must then be
refused like any idle-only command during a turn, not switch the session under the turn.
"""

from __future__ import annotations

import trio

from tests.ui.test_controller import FakeBackend, Harness, run


async def _started(h: Harness) -> None:
    await h.until(lambda: h.controller._nursery is not None)


def _start_turn_first(h: Harness) -> None:
    # The worker won the race: a turn is running by the time the command's task runs.
    h.controller.turn_active = h.terminal.turn_running = True


def test_new_refused_when_a_turn_started_before_it_ran() -> None:
    async def body(h: Harness) -> None:
        await _started(h)
        h.controller.submit("/new")
        _start_turn_first(h)
        await h.until(lambda: "/new cannot run during a turn" in h.output)
        h.controller.turn_active = h.terminal.turn_running = False

    h = run(body, FakeBackend(), warmup=False)
    assert h.backend.new_sessions == 0


def test_session_switch_refused_when_a_turn_started_before_it_ran() -> None:
    async def body(h: Harness) -> None:
        await _started(h)
        h.controller.submit("/sessions 2")
        _start_turn_first(h)
        await h.until(lambda: "/sessions cannot run during a turn" in h.output)
        h.controller.turn_active = h.terminal.turn_running = False

    h = run(body, FakeBackend(), warmup=False)
    assert h.backend.switched == []


def test_model_switch_refused_when_a_turn_started_while_it_listed_models() -> None:
    backend = FakeBackend()
    listed = trio.Event()
    release = trio.Event()

    async def slow_list() -> list[str]:
        listed.set()
        await release.wait()
        return backend.models

    backend.list_models = slow_list  # type: ignore[method-assign]

    async def body(h: Harness) -> None:
        await _started(h)
        h.controller.submit("/model other:2")
        await listed.wait()
        _start_turn_first(h)
        release.set()
        await h.until(lambda: "/model cannot run during a turn" in h.output)
        h.controller.turn_active = h.terminal.turn_running = False

    h = run(body, backend, warmup=False)
    assert h.backend.model == "m:1"
