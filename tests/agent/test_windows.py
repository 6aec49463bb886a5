"""The context window has one owner (``agent/windows.py``) and ``ctx`` one formula: the
fill the status bar shows between turns is the one the turn last showed."""

from __future__ import annotations

from pathlib import Path

from tests.agent.doubles import ScriptedClient, text
from tests.agent.test_loop import make_rig, user
from zcoder.agent.context import DEFAULT_NUM_CTX, Calibration, Window
from zcoder.agent.turns import STOP_MARKER
from zcoder.agent.windows import Windows, measure_fill
from zcoder.conversation import Message
from zcoder.errors import ServerUnavailable
from zcoder.live import ContextFill


def test_the_window_is_the_configured_one_bounded_by_what_the_server_says() -> None:
    windows = Windows(None)
    assert windows.of("m") == Window(DEFAULT_NUM_CTX)
    windows = Windows(8192)
    assert windows.of("m") == Window(8192, configured=True)
    windows.learn("m", 4096)  # a context error's window, told at once
    assert windows.of("m") == Window(4096, by_server=True)
    windows.learn("m", 6000)  # larger than the one decided: it decides, nothing changes
    assert windows.of("m") == Window(4096, by_server=True)
    assert windows.of("other") == Window(8192, configured=True)


async def test_the_server_is_asked_once_per_model() -> None:
    client = ScriptedClient([], context=2048)
    windows = Windows(8192)
    for _ in range(3):
        assert await windows.ask(client, "m", served=False) == Window(2048, by_server=True)
    assert client.asked == ["m"]


async def test_a_server_that_says_nothing_yet_is_asked_again_once_served() -> None:
    client = ScriptedClient([], context=None)
    windows = Windows(None)
    await windows.ask(client, "m", served=False)
    await windows.ask(client, "m", served=False)  # not loaded yet: Ollama lists it later
    await windows.ask(client, "m", served=True)
    await windows.ask(client, "m", served=True)
    assert client.asked == ["m", "m", "m"]
    down = ScriptedClient([], context=ServerUnavailable("down"))
    assert await windows.ask(down, "x", served=True) == Window(DEFAULT_NUM_CTX)
    await windows.ask(down, "x", served=True)
    assert down.asked == ["x", "x"]  # a failure to ask is asked again


def test_the_fill_counts_the_history_as_a_request_sends_it() -> None:
    calibration = Calibration()
    history = [Message("user", "x" * 400), Message("assistant", STOP_MARKER)]
    fill = measure_fill(100, history, calibration, Window(1000))
    assert fill.window == 1000 and fill.tokens > 100
    empty = measure_fill(100, [], calibration, Window(1000))
    assert empty == ContextFill(calibration.tokens(100), 1000) and empty.tokens < fill.tokens


async def test_ctx_between_turns_is_the_one_the_turn_showed(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [text("ok")], context_window=4096)
    assert rig.agent.context_fill() is None  # nothing measured yet
    await rig.agent.run_turn(user("hello " * 200))
    shown = rig.sink.of(ContextFill)[-1]
    assert rig.agent.context_fill() == shown
    assert shown.window == 4096
