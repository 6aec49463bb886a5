"""The status bar keeps showing a model-server failure until a request succeeds (issue 10,
item 8): a slash command, a new prompt or a failed warm-up never turns it back to ready."""

from __future__ import annotations

import trio

from tests.ui.test_controller import FakeBackend, Harness, run
from zcoder.live import StateChange
from zcoder.ui.events import WarmUpRequest


class FailingBackend(FakeBackend):
    """Warm-ups answer with ``warmup_results`` in turn; turns fail like a server that is down."""

    def __init__(self, warmup_results: list[str], turns_fail: bool = True) -> None:
        super().__init__()
        self.warmup_results = warmup_results
        self.turns_fail = turns_fail

    async def warmup(self) -> str:
        self.warmups.append("started")
        await trio.lowlevel.checkpoint()
        return self.warmup_results.pop(0) if self.warmup_results else ""

    async def run_turn(self, text: str) -> str:
        if not self.turns_fail:
            return await super().run_turn(text)
        assert self.sink is not None
        self.turns.append(text)
        self.sink.emit(StateChange("thinking"))
        await trio.lowlevel.checkpoint()
        self.sink.emit(StateChange("error", "llama.cpp is not reachable"))
        return "error"


def test_a_failed_turn_stays_shown_through_slash_commands() -> None:
    async def body(h: Harness) -> None:
        h.keys("hello\r")
        await h.until(lambda: h.turns_ended == 1)
        assert h.backend.turns == ["hello"] and not h.controller.turn_active
        assert h.terminal.status.state == "error"
        h.keys("/help\r")
        await h.until(lambda: "Commands:" in h.output)
        assert h.terminal.status.state == "error"

    run(body, FailingBackend([]), warmup=False)


def test_a_failed_warm_up_shows_the_server_unavailable_until_one_succeeds() -> None:
    async def body(h: Harness) -> None:
        await h.until(lambda: h.backend.warmups == ["started"])
        await h.until(lambda: h.terminal.status.state == "offline")
        assert h.terminal.status.detail == "llama.cpp is not reachable"
        h.keys("/help\r")
        await h.until(lambda: "Commands:" in h.output)
        assert h.terminal.status.state == "offline"
        h.controller.intend(WarmUpRequest())  # as after /model: this time the server answers
        await h.until(lambda: h.terminal.status.warmup == "warm")
        assert h.terminal.status.state == "ready"

    run(body, FailingBackend(["llama.cpp is not reachable"]), warmup=True)


def test_a_cancelled_turn_still_returns_to_ready_on_the_next_input() -> None:
    async def body(h: Harness) -> None:
        h.terminal.status.set_state("stopped")
        h.keys("/help\r")
        await h.until(lambda: "Commands:" in h.output)
        assert h.terminal.status.state == "ready"

    run(body, FailingBackend([], turns_fail=False), warmup=False)
