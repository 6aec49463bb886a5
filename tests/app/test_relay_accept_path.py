"""The listener's call stack ends at the spool (issue 8 item 1): an accepted enqueue sets the
relay's change flag and touches nothing else: not the agent, not the UI, not the status bar.
The worker learns of it by awaiting ``wait_relay_change``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.app.test_relay_app import send, start


async def test_an_accepted_enqueue_calls_nothing_but_the_spool(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trio.open_nursery() as nursery:
        a = await start(nursery, short_tmp, "alpha")
        b = await start(nursery, short_tmp, "beta", follow=False)
        with trio.fail_after(1):
            await b.backend.wait_relay_change()  # the start itself
        touched: list[str] = []

        def record(name: str) -> Any:
            return lambda *args, **kwargs: touched.append(name)

        monkeypatch.setattr(b.backend.agent, "set_toolbox", record("agent.set_toolbox"))
        monkeypatch.setattr(b.sink, "emit", record("sink.emit"))
        monkeypatch.setattr(b.backend, "sync_relay", record("sync_relay"))
        # No public seam: the tools offer the old change chain ran on every enqueue.
        monkeypatch.setattr(b.backend.relay, "_on_tools", record("relay tools offered"))
        assert await send(a, b, "do it") == "accepted"
        assert touched == []
        assert b.backend.relay_status() == ("on", 1)  # stored: the spool knows
        with trio.fail_after(1):  # and the worker would be woken
            await b.backend.wait_relay_change()
        assert touched == []
        nursery.cancel_scope.cancel()
