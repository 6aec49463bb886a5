"""The listener's call stack ends in the relay package (issue 8 item 1): an accepted enqueue
notes a change in the spool's one wait and runs nothing the app supplied: not the agent,
not the UI, not the status bar, no callback of ``app/``. The worker learns of it by
awaiting ``wait_relay_change``. A sender's cancel too (issue 24 item 1): the relay package
answers it, and it reaches the machine as news."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import trio

from tests.app.test_relay_app import send, start

_OUTSIDE_THE_RELAY = ("zcoder.app", "zcoder.ui", "zcoder.agent", "zcoder.tools", "tests")
# Where a connection is served: the accepting task (a request that needs no waiting), a
# connection's own task (one that must wait), the serve_listeners-shaped handler.
_LISTENER_ROOTS = ("_accept_loop", "_serve_rest_and_close", "handle_connection")


def _in_listener(frame: FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name in _LISTENER_ROOTS and frame.f_globals.get("__name__") == (
            "zcoder.relay.listener"
        ):
            return True
        frame = frame.f_back
    return False


@contextmanager
def calls_from_the_listener() -> Iterator[list[str]]:
    """Every Python function outside the relay package called from a frame whose stack
    goes back to where the listener serves a connection, while the block runs."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith(_OUTSIDE_THE_RELAY) and _in_listener(frame):
            called.append(f"{module}.{frame.f_code.co_qualname}")

    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(None)


async def test_an_accepted_enqueue_runs_nothing_of_the_app(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", follow=False)
        with trio.fail_after(10):
            await b.backend.runner.wait_relay_change()  # the start itself
        touched: list[str] = []

        def record(name: str) -> Any:
            return lambda *args, **kwargs: touched.append(name)

        monkeypatch.setattr(b.backend.agent, "set_toolbox", record("agent.set_toolbox"))
        monkeypatch.setattr(b.sink, "emit", record("sink.emit"))
        monkeypatch.setattr(b.backend.runner, "sync_relay", record("sync_relay"))
        with calls_from_the_listener() as called:
            assert await send(a, b, "do it") == "accepted"
        assert called == [] and touched == []
        assert b.backend.inbox.status() == ("on", 1)  # stored: the spool knows
        with trio.fail_after(10):  # and the worker would be woken
            await b.backend.runner.wait_relay_change()
        assert touched == []
        nursery.cancel_scope.cancel()


async def test_the_check_sees_an_app_callable_run_by_the_listener(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old shape: the spool calls back up into the app on every accepted enqueue.
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", follow=False)
        spool = b.backend.relay.service.spool if b.backend.relay.service else None
        assert spool is not None
        note = spool.changes.note

        def chained() -> None:
            note()
            b.backend.runner.relay_runnable()  # an app callable, in the listener's stack

        monkeypatch.setattr(spool.changes, "note", chained)
        with calls_from_the_listener() as called:
            assert await send(a, b, "do it") == "accepted"
        assert "zcoder.app.runner.TurnRunner.relay_runnable" in called
        nursery.cancel_scope.cancel()


async def test_a_senders_cancel_runs_nothing_of_the_app_and_is_news_for_the_worker(
    short_tmp: Path,
) -> None:
    # Issue 24 item 1: the listener answers a cancel from the spool (relay/extension.py);
    # the worker's sync tells the machine, which tells the sender ``cancelled``.
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", follow=False)
        # Nobody claims here (no worker): the message waits until it is withdrawn.
        assert await send(a, b, "withdraw me") == "accepted"
        with calls_from_the_listener() as called:
            line = await a.backend.relay_cancel("1")
        assert called == [] and line.startswith("Withdrawn: ")
        b.backend.runner.sync_relay()  # what the worker does once woken
        assert b.backend.inbox.unrun() == []
        shown = [e.text for e in b.sink.entries()]
        assert any("was withdrawn by its sender before it ran" in text for text in shown)
        await b.backend.relay.receipts.flush(5.0)
        assert b.backend.relay.receipts.stats.delivered >= 1  # ``cancelled`` to alpha
        nursery.cancel_scope.cancel()
