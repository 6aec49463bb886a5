"""The turn loop's model bounds: the context window and its calibration, sampling and the
output cap, the runaway guard, and tool calls printed as text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio

from tests.agent.doubles import HANG, call, text, tools
from tests.agent.test_loop import assert_history_valid, make_rig, user
from zcoder.agent.agent import TurnOutcome
from zcoder.agent.context import DEFAULT_NUM_CTX, estimate_tokens
from zcoder.agent.model import ChatChunk
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.errors import ServerUnavailable


def notes(events: Sequence[TranscriptEvent]) -> list[str]:
    return [e.text for e in events if e.role == "system"]


async def test_the_window_is_the_smaller_of_server_and_config_and_asked_once(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path, [tools(call("read_file", path="a")), text("ok")])
    rig.client.context = 8192
    await rig.agent.run_turn(user("one"))
    await rig.agent.run_turn(user("two"))
    assert [r.num_ctx for r in rig.client.requests] == [8192, 8192, 8192]
    assert rig.client.asked == ["m"]  # once per model, not per step or turn
    rig.agent.set_model("other")
    await rig.agent.run_turn(user("three"))
    assert rig.client.asked == ["m", "other"]
    configured = make_rig(tmp_path, [text("ok")], context_window=4096)
    configured.client.context = 262144
    await configured.agent.run_turn(user("one"))
    assert configured.client.requests[0].num_ctx == 4096


async def test_a_failure_to_ask_is_not_an_error_and_is_asked_again(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [text("ok")])
    rig.client.context = ServerUnavailable("down")
    assert await rig.agent.run_turn(user("one")) == TurnOutcome("answered", text="ok")
    assert rig.client.requests[0].num_ctx == DEFAULT_NUM_CTX
    rig.client.context = 8192
    await rig.agent.run_turn(user("two"))
    assert rig.client.requests[1].num_ctx == 8192 and len(rig.client.asked) == 2


async def test_no_window_reported_before_the_model_served_is_asked_again_once(
    tmp_path: Path,
) -> None:
    # Ollama's /v1 lists a model's window in /api/ps only once the model is loaded.
    rig = make_rig(tmp_path, [text("ok")])
    await rig.agent.run_turn(user("one"))
    rig.client.context = 8192
    await rig.agent.run_turn(user("two"))
    assert [r.num_ctx for r in rig.client.requests] == [DEFAULT_NUM_CTX, 8192]
    silent = make_rig(tmp_path, [text("ok")])
    for prompt in ("one", "two", "three"):
        await silent.agent.run_turn(user(prompt))
    assert silent.client.asked == ["m", "m"]  # before and after it served: then known


async def test_temperature_and_output_cap_are_sent(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [text("ok")], temperature=0.2, max_output_tokens=512)
    await rig.agent.run_turn(user("q"))
    request = rig.client.requests[0]
    assert (request.temperature, request.num_predict) == (0.2, 512)
    default = make_rig(tmp_path, [text("ok")])
    await default.agent.run_turn(user("q"))
    assert default.client.requests[0].temperature is None  # the server's default
    assert default.client.requests[0].num_predict == 4096


async def test_a_reply_cut_by_the_output_cap_says_so(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, [text("A long ans", done_reason="length")], max_output_tokens=64)
    outcome = await rig.agent.run_turn(user("q"))
    line = "The reply was cut off: the model hit its output limit (64 tokens, --max-output-tokens)."
    assert outcome == TurnOutcome("cut_off", text="A long ans", error=line)
    assert notes(rig.session.events) == [line]


async def test_a_reply_cut_by_the_room_the_window_left_names_that_cap(tmp_path: Path) -> None:
    # A 2,048-token window leaves the reply less than --max-output-tokens' 4,096: the note
    # names the cap that cut it, not the flag (raising it would change nothing).
    rig = make_rig(tmp_path, [text("A long ans", done_reason="length")])
    rig.client.context = 2048
    await rig.agent.run_turn(user("q"))
    cap = rig.client.requests[0].num_predict
    assert cap is not None and cap < 4096
    assert notes(rig.session.events) == [
        f"The reply was cut off: the model hit its output limit ({cap:,} tokens, all the room "
        "left in the 2,048-token context window)."
    ]


async def test_a_reply_cut_before_it_said_anything_is_an_error_not_a_nudge(
    tmp_path: Path,
) -> None:
    cut = [ChatChunk(thinking="hmm " * 10), ChatChunk(done=True, done_reason="length")]
    rig = make_rig(tmp_path, [cut], max_output_tokens=64)
    outcome = await rig.agent.run_turn(user("q"))
    assert outcome.status == "error"
    assert "output limit (64 tokens) before it said anything" in outcome.error
    assert len(rig.client.requests) == 1
    assert rig.session.history == [Message(role="user", content="q")]


async def test_a_runaway_reply_is_stopped_with_a_clear_line(tmp_path: Path) -> None:
    loop = [ChatChunk(content="I will check the file again. ") for _ in range(200)]
    # HANG: had the loop not stopped the stream, the turn would never end.
    rig = make_rig(tmp_path, [[*loop, HANG], text("fine")])
    with trio.fail_after(10):
        outcome = await rig.agent.run_turn(user("q"))
    assert outcome.status == "loop_stopped"
    assert "kept repeating the same text in its reply" in outcome.error
    assert rig.client.open_streams == 0  # the stream was closed: the server stops
    assert rig.session.history == [Message(role="user", content="q")]
    assert await rig.agent.run_turn(user("again")) == TurnOutcome("answered", text="fine")


async def test_runaway_thinking_is_stopped_too(tmp_path: Path) -> None:
    loop = [ChatChunk(thinking="Wait, let me reconsider. ") for _ in range(200)]
    rig = make_rig(tmp_path, [[*loop, HANG]])
    with trio.fail_after(10):
        outcome = await rig.agent.run_turn(user("q"))
    assert outcome.status == "loop_stopped" and "in its thinking" in outcome.error


async def test_a_window_the_fixed_prompt_alone_overflows_ends_the_turn_saying_so(
    tmp_path: Path,
) -> None:
    # Learn the first request's estimate, then let the server report twice as many tokens.
    probe = make_rig(tmp_path, [text("ok")])
    await probe.agent.run_turn(user("q"))
    first = probe.client.requests[0]
    estimate = estimate_tokens(first.messages, first.tools)
    reported = [ChatChunk(tool_calls=(call("read_file", path="a"),))]
    reported.append(ChatChunk(done=True, prompt_eval_count=2 * estimate))
    window = int(estimate * 1.5)
    rig = make_rig(tmp_path, [reported, text("ok")], context_window=window)
    outcome = await rig.agent.run_turn(user("q"))
    assert outcome.status == "error"
    assert "The system prompt and tool schemas alone take about" in outcome.error
    assert f"of the {window:,}-token context window" in outcome.error
    assert "raise --context-window" in outcome.error
    assert len(rig.client.requests) == 1  # the second step was never sent
    assert_history_valid(rig.session.history)
    # without the server's count the raw estimate fits: the turn runs
    uncalibrated = make_rig(
        tmp_path, [tools(call("read_file", path="a")), text("ok")], context_window=window
    )
    assert (await uncalibrated.agent.run_turn(user("q"))).status == "answered"


async def test_tagged_and_xml_printed_calls_run_with_typed_arguments(tmp_path: Path) -> None:
    printed = (
        "Let me run the tests.\n<tool_call>\n<function=run_command>\n"
        "<parameter=command>\npytest -q\n</parameter>\n<parameter=timeout_seconds>\n30\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    rig = make_rig(tmp_path, [text(printed), text("All green.")], "y")
    outcome = await rig.agent.run_turn(user("test it"))
    assert outcome == TurnOutcome("answered", text="All green.")
    ran = {"command": "pytest -q", "cwd": ".", "timeout_seconds": 30}  # the default cwd added
    assert rig.toolbox.calls == [("run_command", ran)]
    assert rig.session.history[1] == Message(
        role="assistant",
        content="Let me run the tests.",
        tool_calls=(ToolCall("run_command", {"command": "pytest -q", "timeout_seconds": 30}),),
    )
    assert "Ran a tool call the model printed as text (run_command)." in notes(
        list(rig.session.events)
    )
    assert_history_valid(rig.session.history)


async def test_printed_calls_can_be_turned_off(tmp_path: Path) -> None:
    printed = '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>'
    rig = make_rig(tmp_path, [text(printed)], text_tool_calls=False)
    outcome = await rig.agent.run_turn(user("read a.py"))
    assert outcome == TurnOutcome("answered", text=printed)
    assert rig.toolbox.calls == []
