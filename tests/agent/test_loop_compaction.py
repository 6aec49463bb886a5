"""The turn's compaction against the scripted model: before a request that would pass the
threshold, after a server's context error (once), by hand (``/compact``), cancelled,
and when the summary request fails or the server is down."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.agent.doubles import HANG, FakeToolbox, Reply, call, text, tools
from tests.agent.test_loop import SENDER, Rig, assert_history_valid, make_rig, user
from zcoder.agent.agent import TurnOutcome, TurnRequest
from zcoder.agent.compaction import SUMMARY_ACK, SUMMARY_OPEN
from zcoder.agent.context import UNCALIBRATED, estimate_tokens
from zcoder.agent.model import ChatChunk, ChatRequest
from zcoder.agent.turns import STOP_MARKER
from zcoder.conversation import Message, ToolCall, TranscriptEvent
from zcoder.errors import ModelHTTPError, ServerUnavailable, StreamErrorLine
from zcoder.live import ContextFill, Entry, StateChange

# llama.cpp's own words when a prompt does not fit the window it was started with
LLAMA_CPP_OVERFLOW = (
    "request (2420 tokens) exceeds the available context size (2048 tokens), try increasing it"
)
OLLAMA_OVERFLOW = "the input length exceeds the context length"
SUMMARY = "Requests: fix the parser. Decisions: none yet."


def past(exchanges: int, result_chars: int) -> list[Message]:
    """Earlier exchanges: a request, a read of a file, and an answer."""
    history: list[Message] = []
    for n in range(exchanges):
        read = ToolCall("read_file", {"path": f"{n}"})
        history += [
            Message(role="user", content=f"look at module {n}"),
            Message(role="assistant", content="", tool_calls=(read,)),
            Message(role="tool", content=f"{n}:" + "x" * result_chars, tool_name="read_file"),
            Message(role="assistant", content=f"module {n} is fine"),
        ]
    return history


def rig_with(
    tmp_path: Path,
    replies: Sequence[Reply],
    history: list[Message],
    summaries: Reply | None = None,
    **config: Any,
) -> Rig:
    """A rig whose session holds ``history``; ``summaries`` answers every summary request."""
    rig = make_rig(tmp_path, replies, **config)
    rig.client.summaries = summaries
    rig.session.history[:] = history
    rig.session.events[:] = [TranscriptEvent(role="user", text=f"earlier {n}") for n in range(3)]
    return rig


def is_summary_request(request: ChatRequest) -> bool:
    return not request.tools


def check_summary_request(request: ChatRequest, cap: int) -> None:
    """``cap``: the window's share for a summary; a third of the history's room (half the
    window at most, less where the fixed part is large) may lower it."""
    assert request.tools == () and request.think is False
    assert request.num_predict is not None and 64 <= request.num_predict <= cap
    assert [m.role for m in request.messages] == ["system", "user"]


def compacted_notes(rig: Rig) -> list[str]:
    return [e.text for e in rig.session.events if e.role == "system" and "compacted" in e.text]


def request_tokens(request: ChatRequest) -> int:
    """A request's size as an uncalibrated turn measures it."""
    return round(estimate_tokens(request.messages, request.tools) * UNCALIBRATED)


async def test_a_history_past_the_threshold_is_compacted_before_the_request(
    tmp_path: Path,
) -> None:
    before = past(8, 1200)
    rig = rig_with(tmp_path, [text("Fixed.")], before, text(SUMMARY), context_window=4096)
    outcome = await rig.agent.run_turn(user("now fix the parser"))
    assert outcome.status == "answered" and outcome.text == "Fixed."
    # only an estimate says to compact: the fixed part is counted first (this server
    # counts nothing, so the estimate stands)
    probe, *summaries, real = rig.client.requests
    assert probe.num_predict == 1 and [m.role for m in probe.messages] == ["system", "user"]
    assert summaries and not is_summary_request(real)
    for n, summary in enumerate(summaries):
        check_summary_request(summary, cap=512)
        carried = f"Summary of what came before:\n{SUMMARY}" in summary.messages[1].content
        assert carried == (n > 0)  # each later part carries the summary so far
    assert "look at module 0" in summaries[0].messages[1].content
    # the real request: the record, its acknowledgement, the kept exchanges, the prompt
    history = real.messages[1:]
    assert history[0].role == "user" and history[0].content.startswith(SUMMARY_OPEN)
    assert SUMMARY in history[0].content
    assert history[1] == Message(role="assistant", content=SUMMARY_ACK)
    assert history[-1] == Message(role="user", content="now fix the parser")
    kept = history[2:-1]
    assert kept and kept == before[len(before) - len(kept) :]  # word for word
    assert kept[0].role == "user"
    threshold = 4096 * 80 // 100
    assert request_tokens(real) <= threshold
    assert_history_valid(rig.session.history)
    assert rig.session.history == [*history, Message(role="assistant", content="Fixed.")]
    # one note in the transcript; the transcript itself keeps everything
    [note] = compacted_notes(rig)
    assert note.startswith("compacted ") and " messages (" in note and " -> " in note
    assert [e.text for e in rig.session.events[:3]] == ["earlier 0", "earlier 1", "earlier 2"]
    assert "compacting" in [s.state for s in rig.sink.of(StateChange)]
    fills = rig.sink.of(ContextFill)
    assert fills and fills[-1].tokens <= threshold and fills[-1].window == 4096


async def test_a_history_under_the_threshold_is_sent_as_it_is(tmp_path: Path) -> None:
    before = past(2, 400)
    rig = rig_with(tmp_path, [text("Fixed.")], before, context_window=4096)
    assert (await rig.agent.run_turn(user("now fix it"))).status == "answered"
    [request] = rig.client.requests
    assert request.messages[1:] == [*before, Message(role="user", content="now fix it")]
    assert compacted_notes(rig) == []


async def test_the_servers_count_decides_when_to_compact(tmp_path: Path) -> None:
    # SmolLM2's template drops the tool schemas: the server counts far fewer tokens than
    # estimated. A history the estimate alone would compact is sent whole.
    replies = [text("one", prompt_tokens=300), text("two")]
    rig = rig_with(tmp_path, replies, [], text(SUMMARY), context_window=4096)
    assert (await rig.agent.run_turn(user("first"))).status == "answered"
    rig.session.history[:0] = past(7, 1200)
    assert (await rig.agent.run_turn(user("second"))).status == "answered"
    first, second = rig.client.requests
    threshold = 4096 * 80 // 100
    assert request_tokens(second) > threshold  # by the estimate: compact
    counted = 300 + round(
        (
            estimate_tokens(second.messages, second.tools)
            - estimate_tokens(first.messages, first.tools)
        )
        * UNCALIBRATED
    )
    assert counted <= threshold and compacted_notes(rig) == []
    assert second.messages[1:-1] == [
        *past(7, 1200),
        *first.messages[1:],
        Message(role="assistant", content="one"),
    ]


async def test_a_servers_context_error_is_compacted_and_the_step_sent_again(
    tmp_path: Path,
) -> None:
    before = past(5, 1200)
    overflow = ModelHTTPError(400, LLAMA_CPP_OVERFLOW)
    rig = rig_with(tmp_path, [overflow, text("Done.")], before, text(SUMMARY))
    outcome = await rig.agent.run_turn(TurnRequest("relay", "rename users.name", SENDER))
    assert outcome.status == "answered" and outcome.text == "Done."
    first, *summaries, again = rig.client.requests
    assert first.num_ctx == 16384  # the window was not known yet: the error told it
    assert summaries and again.num_ctx == 2048
    for summary in summaries:
        check_summary_request(summary, cap=256)
        assert summary.num_ctx == 2048
    assert again.messages[1].content.startswith(SUMMARY_OPEN)
    assert "rename users.name" in again.messages[-1].content  # the relayed task is kept
    assert len(compacted_notes(rig)) == 1
    assert_history_valid(rig.session.history)
    # the agent remembers the window the server named
    rig.client.replies.append(text("Next."))
    assert (await rig.agent.run_turn(user("next"))).status == "answered"
    assert rig.client.requests[-1].num_ctx == 2048


async def test_a_second_context_error_ends_the_turn(tmp_path: Path) -> None:
    before = past(5, 1200)
    overflow = ModelHTTPError(400, LLAMA_CPP_OVERFLOW)
    rig = rig_with(tmp_path, [overflow, overflow], before, text(SUMMARY))
    outcome = await rig.agent.run_turn(TurnRequest("relay", "rename users.name", SENDER))
    assert outcome.status == "error"
    assert outcome.reached_model  # settled as failed, not retried as if the model were down
    assert "does not fit the model's 2,048-token context window, even compacted" in outcome.error
    assert "exceeds the available context size" in outcome.error
    assert [is_summary_request(r) for r in rig.client.requests][-1] is False
    assert rig.session.events[-1] == TranscriptEvent(
        role="error", text=outcome.error, at=rig.session.events[-1].at
    )
    assert_history_valid(rig.session.history)


async def test_a_relayed_task_too_large_for_the_window_is_refused(tmp_path: Path) -> None:
    # Nothing to compact: the task alone overflows. The server's count says so after the
    # first refusal; no request is sent in vain again, and the relay settles it failed.
    overflow = ModelHTTPError(400, LLAMA_CPP_OVERFLOW)
    rig = make_rig(tmp_path, [overflow])
    outcome = await rig.agent.run_turn(TurnRequest("relay", "x" * 9000, SENDER))
    assert outcome.status == "error" and outcome.reached_model
    assert "does not fit the model's 2,048-token context window, even compacted" in outcome.error
    assert len(rig.client.requests) == 1


async def test_escape_during_a_compaction_leaves_the_history_as_it_was(tmp_path: Path) -> None:
    before = past(8, 1200)
    script = [text(""), [ChatChunk(content="Requests: "), HANG]]  # the fixed part counted
    rig = rig_with(tmp_path, script, before, context_window=4096)

    async def escape() -> None:
        await rig.sink.watch(
            lambda e: isinstance(e, StateChange) and e.state == "compacting"
        ).wait()
        await trio.testing.wait_all_tasks_blocked()
        assert rig.client.open_streams == 1  # the summary request is streaming
        assert rig.agent.cancel_turn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(escape)
        outcome = await rig.agent.run_turn(user("now fix the parser"))
    assert outcome.status == "cancelled"
    _, summary = rig.client.requests
    assert is_summary_request(summary)
    assert rig.client.open_streams == 0
    assert rig.session.history == [
        *before,
        Message(role="user", content="now fix the parser"),
        Message(role="assistant", content=STOP_MARKER),
    ]
    assert compacted_notes(rig) == []
    assert rig.sink.of(StateChange)[-1] == StateChange("stopped")
    assert rig.store.saved[-1] == rig.session.history


async def test_compact_by_hand_with_a_focus(tmp_path: Path) -> None:
    before = past(4, 200)
    rig = rig_with(tmp_path, [], before, text(SUMMARY), context_window=8192)
    assert await rig.agent.compact("the parser's error messages")
    [summary] = rig.client.requests
    check_summary_request(summary, cap=1024)
    assert summary.messages[1].content.endswith("Give most room to: the parser's error messages")
    history = rig.session.history
    assert history[0].content.startswith(SUMMARY_OPEN) and SUMMARY in history[0].content
    assert history[2:] == before[-8:]  # the last two exchanges, word for word
    assert len(compacted_notes(rig)) == 1
    assert rig.store.saved[-1] == history
    assert rig.sink.of(StateChange)[-1] == StateChange("ready")
    # a turn afterwards sends the compacted history
    rig.client.replies = [text("ok")]
    await rig.agent.run_turn(user("go on"))
    assert rig.client.requests[-1].messages[1:4] == history[:3]


async def test_nothing_to_compact_by_hand(tmp_path: Path) -> None:
    rig = rig_with(tmp_path, [text(SUMMARY)], past(1, 200), context_window=8192)
    assert not await rig.agent.compact()
    assert rig.client.requests == [] and rig.session.history == past(1, 200)


async def test_a_record_longer_than_what_it_replaces_is_not_kept(tmp_path: Path) -> None:
    # Two short exchanges and a model that writes at length: the compaction would grow the
    # history, so it leaves it as it was and says why, in one line.
    before = past(3, 20)
    rig = rig_with(tmp_path, [], before, text("word " * 900), context_window=8192)
    assert not await rig.agent.compact()
    assert rig.session.history == before
    assert compacted_notes(rig) == []
    notes = [e.event.text for e in rig.sink.events if isinstance(e, Entry)]
    assert notes == [
        "compaction skipped: the summary would not be smaller than the 4 messages it replaces"
    ]


async def test_escape_during_compact_by_hand_changes_nothing(tmp_path: Path) -> None:
    before = past(4, 200)
    rig = rig_with(tmp_path, [[HANG]], before, context_window=8192)

    async def escape() -> None:
        await trio.testing.wait_all_tasks_blocked()
        assert rig.client.open_streams == 1
        assert rig.agent.cancel_turn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(escape)
        assert not await rig.agent.compact("x")
    assert rig.session.history == before and compacted_notes(rig) == []
    assert rig.sink.of(StateChange)[-1] == StateChange("stopped")
    assert not rig.agent.busy


async def test_a_failed_summary_falls_back_to_zcoders_own_record(tmp_path: Path) -> None:
    failures: list[Reply] = [
        ModelHTTPError(500, "Internal Server Error"),
        [ChatChunk(content="Requests:"), StreamErrorLine("out of memory")],
        text(""),  # an empty summary
    ]
    for failure in failures:
        before = past(8, 1200)
        script = [text(""), failure, text("Fixed.")]  # the count of the fixed part first
        rig = rig_with(tmp_path, script, before, context_window=4096)
        outcome = await rig.agent.run_turn(user("now fix the parser"))
        assert outcome.status == "answered" and outcome.text == "Fixed."
        _, summary, real = rig.client.requests
        assert is_summary_request(summary) and not is_summary_request(real)
        record = rig.session.history[0].content
        assert record.startswith(SUMMARY_OPEN)
        assert "zcoder could not get a summary from the model" in record
        assert "- look at module 0" in record  # the user's requests, word for word
        [note] = compacted_notes(rig)
        assert "no summary from the model" in note and "zcoder kept its own record" in note
        assert_history_valid(rig.session.history)


async def test_a_server_down_during_compaction_fails_like_a_model_that_is_down(
    tmp_path: Path,
) -> None:
    down = ServerUnavailable("cannot reach http://127.0.0.1:9", reason="refused")
    before = past(8, 1200)
    rig = rig_with(tmp_path, [down], before, context_window=4096)
    outcome = await rig.agent.run_turn(TurnRequest("relay", "rename users.name", SENDER))
    # the same outcome as without a compaction: not reached, so the relay retries it
    plain = make_rig(tmp_path, [down], context_window=4096)
    expected = await plain.agent.run_turn(TurnRequest("relay", "rename users.name", SENDER))
    assert outcome == expected and outcome.status == "error" and not outcome.reached_model
    assert rig.session.history == before  # the relayed task left no copy
    assert compacted_notes(rig) == []


@pytest.mark.parametrize("error", [LLAMA_CPP_OVERFLOW, OLLAMA_OVERFLOW])
async def test_a_step_that_was_sent_again_does_not_force_the_next_ones(
    tmp_path: Path, error: str
) -> None:
    # Ollama's error names no sizes: the window stays as configured, and the compaction
    # keeps two exchanges, which a forced one at every later step would summarise again.
    before = past(5, 1200)
    replies: list[Reply] = [
        ModelHTTPError(400, error),
        tools(call("read_file", path="a.py")),
        text("Done."),
    ]
    rig = rig_with(tmp_path, replies, before, text(SUMMARY), context_window=8192)
    outcome = await rig.agent.run_turn(user("fix a.py"))
    assert outcome.status == "answered" and outcome.text == "Done."
    # one compaction: the steps after the retried one compact only when they must
    summaries = [is_summary_request(r) for r in rig.client.requests]
    assert summaries == [False, *[True] * (len(summaries) - 3), False, False]
    assert len(compacted_notes(rig)) == 1


async def test_a_context_error_after_a_step_that_got_through_is_compacted_again(
    tmp_path: Path,
) -> None:
    overflow = ModelHTTPError(400, OLLAMA_OVERFLOW)
    replies: list[Reply] = [
        overflow,
        tools(call("read_file", path="a.py")),
        overflow,
        text("Done."),
    ]
    rig = rig_with(tmp_path, replies, past(5, 1200), text(SUMMARY), context_window=8192)
    outcome = await rig.agent.run_turn(user("fix a.py"))
    assert outcome.status == "answered" and outcome.text == "Done."
    # Compacted again: the second time the model's record (the same words) replaces only
    # the first record, so the history is kept as it was and the line says so.
    assert [is_summary_request(r) for r in rig.client.requests] == [
        False,
        True,
        False,
        False,
        True,
        False,
    ]
    notes = [e.text for e in rig.session.events if e.role == "system"]
    assert len(notes) == 2 and notes[0].startswith("compacted 16 messages")
    assert notes[1] == (
        "compaction skipped: the summary would not be smaller than the 2 messages it replaces"
    )


async def test_a_relayed_task_compacted_before_the_server_went_down_leaves_no_copy(
    tmp_path: Path,
) -> None:
    # The summary request fails before the model saw anything (HTTP 500: zcoder keeps its
    # own record), then the server is down: the relay will send the task again, so the
    # compacted history must not keep this copy of it.
    down = ServerUnavailable("cannot reach http://127.0.0.1:9", reason="refused")
    failed = ModelHTTPError(500, "Internal Server Error")
    # (the count of the fixed part before the compaction fails the same way: no reach)
    rig = rig_with(tmp_path, [failed, failed, down], past(8, 1200), context_window=4096)
    outcome = await rig.agent.run_turn(TurnRequest("relay", "rename users.name", SENDER))
    assert outcome.status == "error" and not outcome.reached_model
    assert [n for n in compacted_notes(rig) if "zcoder kept its own record" in n]
    assert rig.session.history[0].content.startswith(SUMMARY_OPEN)  # the compaction stays
    assert all("rename users.name" not in m.content for m in rig.session.history)
    assert_history_valid(rig.session.history)


VLLM_CAP_OVERFLOW = (
    "This model's maximum context length is 16384 tokens. However, you requested 16900 "
    "tokens (900 in the messages, 16000 in the completion). Please reduce the length of the "
    "messages or completion."
)


async def test_a_refusal_of_the_replys_cap_alone_is_sent_again_without_compacting(
    tmp_path: Path,
) -> None:
    # vLLM counts the prompt plus max_tokens: the prompt (900 tokens) fits, so the step goes
    # again, its cap corrected from the server's count, and nothing is summarised.
    refusal = ModelHTTPError(400, VLLM_CAP_OVERFLOW)
    rig = rig_with(tmp_path, [refusal, text("Done.")], past(2, 100), text(SUMMARY))
    outcome = await rig.agent.run_turn(user("go on"))
    assert (outcome.status, outcome.text) == ("answered", "Done.")
    assert not any(is_summary_request(r) for r in rig.client.requests)
    assert compacted_notes(rig) == []


async def test_a_task_that_no_compaction_can_fit_is_refused_before_any_summary(
    tmp_path: Path,
) -> None:
    # The server has counted (the anchor): a task four times the window ends the turn at
    # once; the older history is not summarised for nothing, and the task leaves no copy.
    counted = [ChatChunk(content="ok"), ChatChunk(done=True, prompt_eval_count=1500)]
    rig = rig_with(tmp_path, [counted], past(3, 400), text(SUMMARY), context_window=2048)
    await rig.agent.run_turn(user("first"))
    history = list(rig.session.history)
    sent = len(rig.client.requests)
    outcome = await rig.agent.run_turn(TurnRequest("relay", "y " * 8000, SENDER))
    assert outcome.status == "error" and outcome.reached_model
    assert "does not fit the model's" in outcome.error or "2,048-token" in outcome.error
    assert len(rig.client.requests) == sent  # no summary, no refused request
    assert rig.session.history == history  # the oversized task is not left for the model


async def test_a_dense_task_the_server_refused_does_not_measure_the_requests_after_it(
    tmp_path: Path,
) -> None:
    # As SmolLM2 behind llama.cpp: its template drops the tool schemas (the first request
    # counts 150 tokens, estimated near 600), and digits are a token each, so a task
    # estimated well inside the window is counted past it (2,620 tokens). That count
    # measures that request only: it is not the system prompt's size, and once the task
    # left the history it is not what the next requests are measured from (every later
    # task was refused unsent, its system prompt said to be too large for the window).
    counted = [ChatChunk(content="ok"), ChatChunk(done=True, prompt_eval_count=150)]
    dense = ModelHTTPError(400, LLAMA_CPP_OVERFLOW.replace("2420", "2620"))
    rig = make_rig(tmp_path, [counted, dense, text("Done.")])
    rig.client.context = 2048
    await rig.agent.run_turn(user("first"))
    history = list(rig.session.history)
    outcome = await rig.agent.run_turn(TurnRequest("relay", "7" * 2000, SENDER))
    assert outcome.status == "error" and outcome.reached_model
    assert "does not fit the model's 2,048-token context window, even compacted" in outcome.error
    assert "system prompt and tool schemas alone" not in outcome.error
    assert rig.session.history == history
    assert await rig.agent.run_turn(user("next")) == TurnOutcome("answered", text="Done.")
    assert len(rig.client.requests) == 3


def big_fixed_rig(tmp_path: Path, probe: Reply) -> Rig:
    """The reported case: a 4,096 window whose system prompt and tools (many MCP tools)
    are estimated past the threshold, a first turn stopped before anything was counted,
    and a server that answers the count of the fixed part with ``probe``."""
    box = FakeToolbox()
    box.names += [f"mcp__big__tool_number_{n}_with_a_long_name" for n in range(90)]
    replies = [probe, text("It holds the parser.")]
    rig = make_rig(tmp_path, replies, toolbox=box, context_window=4096)
    rig.session.history[:] = [
        Message(role="user", content="hello there"),
        Message(role="assistant", content=STOP_MARKER),
    ]
    return rig


@pytest.mark.parametrize("counted", [506, 0])
async def test_a_large_estimated_fixed_part_is_counted_not_compacted(
    tmp_path: Path, counted: int
) -> None:
    # 0: a server that counts nothing; the request still goes out as it is.
    rig = big_fixed_rig(tmp_path, text("", prompt_tokens=counted))
    outcome = await rig.agent.run_turn(user("now what is in a.py"))
    assert (outcome.status, outcome.text) == ("answered", "It holds the parser.")
    probe, real = rig.client.requests
    assert probe.num_predict == 1 and [m.role for m in probe.messages] == ["system", "user"]
    # by the estimate the fixed part alone passes the threshold (else this tests nothing)
    assert request_tokens(probe) > 4096 * 80 // 100
    assert not any(is_summary_request(r) for r in rig.client.requests)
    # the history goes out whole (the stop a note on the user's side), no record in it
    assert all(not m.content.startswith(SUMMARY_OPEN) for m in real.messages)
    assert real.messages[1].content.startswith("hello there")
    assert real.messages[-1].content.endswith("now what is in a.py")
    assert compacted_notes(rig) == []
    assert not [e for e in rig.session.events if "compaction" in e.text]
