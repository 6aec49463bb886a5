"""What a request sends for a history with stops (``agent/stop_note.py``): pure, no Trio.

The stop marker stays in the history; a request carries a user-side note instead, never
the marker as the model's own words, and never two user messages in a row (strict chat
templates raise on them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import pairwise

import attrs
import pytest

from tests.agent.test_compaction import calls, finish, read, relayed, sender, user
from zcoder.agent.compaction import SUMMARY_ACK, compacted_history, relay_ledger
from zcoder.agent.loop_guard import EMPTY_REPLY_NUDGE
from zcoder.agent.stop_note import NO_REPLY, STOP_NOTE, sent_history
from zcoder.agent.turns import STOP_MARKER, relay_record
from zcoder.conversation import Message

STOP = Message(role="assistant", content=STOP_MARKER)


def answer(text: str) -> Message:
    return Message(role="assistant", content=text)


def assert_sendable(messages: Sequence[Message]) -> None:
    """User and assistant alternate (a tool result follows a call or another result), and
    the marker is nowhere: not as the model's words, not inside a note."""
    for before, after in pairwise(messages):
        assert not (before.role == after.role and after.role in ("user", "assistant")), (
            before,
            after,
        )
        if after.role == "tool":
            assert before.role == "tool" or before.tool_calls, (before, after)
    assert all(STOP_MARKER not in m.content for m in messages)


def test_a_history_without_stops_is_sent_as_it_is() -> None:
    history = [
        user("read a.py"),
        *calls((read("a.py"), "x = 1")),
        answer("It sets x."),
        user("thanks"),
        answer("You are welcome."),
    ]
    assert sent_history(history) == history


def test_a_stop_after_tool_results_is_noted_in_the_last_result() -> None:
    # Stopped after a full tool round: the note ends the stopped turn's last result (one
    # user-side message, as Claude Code sends it), and the next prompt is its own message.
    history = [user("fix it"), *calls((read("a.py"), "x = 1")), STOP, user("do y instead")]
    sent = sent_history(history)
    head = calls((read("a.py"), "x = 1"))
    assert sent == [
        user("fix it"),
        head[0],
        attrs.evolve(head[1], content=f"x = 1\n\n{STOP_NOTE}"),
        NO_REPLY,
        user("do y instead"),
    ]
    assert_sendable(sent)
    # the history itself keeps its marker
    assert history[-2] == STOP


def test_a_stopped_prompt_keeps_its_place_and_the_next_prompt_is_its_own() -> None:
    # Escape while the first reply streamed: its partial text never entered the history.
    stopped = [user("write a poem"), STOP]
    assert sent_history(stopped) == [user(f"write a poem\n\n{STOP_NOTE}")]
    sent = sent_history([*stopped, user("write code")])
    assert sent == [user(f"write a poem\n\n{STOP_NOTE}"), NO_REPLY, user("write code")]
    assert_sendable(sent)


def test_a_stop_after_an_answer_is_a_note_of_its_own() -> None:
    history = [user("a"), answer("A."), STOP, user("b")]
    assert sent_history(history) == [user("a"), answer("A."), user(STOP_NOTE), NO_REPLY, user("b")]


def test_stops_in_a_row_and_a_nudge_each_keep_their_own_message() -> None:
    history = [user("a"), STOP, user("b"), STOP, user("c"), user(EMPTY_REPLY_NUDGE)]
    sent = sent_history(history)
    assert sent == [
        user(f"a\n\n{STOP_NOTE}"),
        NO_REPLY,
        user(f"b\n\n{STOP_NOTE}"),
        NO_REPLY,
        user("c"),
        NO_REPLY,  # the empty reply the nudge answers
        user(EMPTY_REPLY_NUDGE),
    ]
    assert_sendable(sent)


def test_a_prompt_after_a_failed_turn_is_not_joined_to_it() -> None:
    # A turn that reached the model and then failed leaves its prompt without an answer.
    history = [user("first"), *calls((read("a.py"), "x = 1")), user("second")]
    sent = sent_history(history)
    assert sent[-2:] == [NO_REPLY, user("second")]
    assert [m.content for m in sent if m.role == "user"] == ["first", "second"]
    assert_sendable(sent)


def test_a_relayed_task_after_a_stop_is_its_record_alone() -> None:
    record = relay_record(sender(1), "rename users.name")
    history = [relayed(0, "add a test"), *calls((read("t.py"), "ok")), STOP, user(record)]
    sent = sent_history(history)
    assert sent[-1] == user(record)
    assert sent[-2] == NO_REPLY
    assert_sendable(sent)
    # the compaction reads the raw history: the stopped task's outcome is still a stop
    [line] = relay_ledger(history[:-1])
    assert line.endswith("-> stopped by the receiver's user")


def test_a_compacted_history_with_a_stop_in_its_kept_part() -> None:
    tail = [user("fix it"), *calls((read("a.py"), "x = 1")), STOP]
    history = [*compacted_history("the record", [], tail), user("go on")]
    sent = sent_history(history)
    assert sent[1] == answer(SUMMARY_ACK)
    assert sent[-2:] == [NO_REPLY, user("go on")]
    assert sent[-3].content == f"x = 1\n\n{STOP_NOTE}"
    assert_sendable(sent)


def test_a_reply_that_parroted_the_marker_is_not_sent_as_the_models_either() -> None:
    # Sessions saved before this fix hold the model's own copies of the marker.
    history = [user("a"), STOP, user("task"), answer(STOP_MARKER), user("next task")]
    assert sent_history(history) == [
        user(f"a\n\n{STOP_NOTE}"),
        NO_REPLY,
        user(f"task\n\n{STOP_NOTE}"),
        NO_REPLY,
        user("next task"),
    ]


# --- every shape the loop makes, at every point a request is built ------------------------


def _turn(rng: random.Random, n: int) -> list[Message]:
    """One turn as the loop records it: a prompt or a relayed task, maybe a nudge, tool
    rounds, then an answer, a finish or a stop (before any reply or after a round)."""
    out = [relayed(n, f"task {n}") if rng.random() < 0.3 else user(f"prompt {n}")]
    if rng.random() < 0.15:
        out.append(user(EMPTY_REPLY_NUDGE))
    for r in range(rng.choice((0, 0, 1, 2))):
        out += calls(*((read(f"f{n}_{r}_{k}.py"), f"text {k}") for k in range(rng.randint(1, 3))))
    ending = rng.choice(("answer", "finish", "stop"))
    if ending == "answer":
        out.append(answer(f"answer {n}"))
    elif ending == "finish":
        out += finish("complete", f"done {n}")
    else:
        out.append(STOP)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_every_request_of_a_random_session_is_sendable(seed: int) -> None:
    rng = random.Random(seed)
    history: list[Message] = []
    for n in range(rng.randint(1, 12)):
        history += _turn(rng, n)
    if rng.random() < 0.3:
        # a compaction keeps a tail that starts at a user message
        start = rng.choice([i for i, m in enumerate(history) if m.role == "user"])
        history = compacted_history("the record", [], history[start:])
    kept = list(history)
    previous: list[Message] = []
    for end in range(1, len(history) + 1):
        prefix = history[:end]
        sent = sent_history(prefix)
        assert_sendable(sent)
        stops = sum(m == STOP for m in prefix)
        assert sum(m.content.count(STOP_NOTE) for m in sent) == stops
        # nothing is lost or joined: without the notes and the empty replies, the request
        # is the history without its markers, message for message
        assert [
            attrs.evolve(m, content=m.content.removesuffix(f"\n\n{STOP_NOTE}"))
            for m in sent
            if m != NO_REPLY and m != user(STOP_NOTE)
        ] == [m for m in prefix if m != STOP]
        # the prompt cache keeps its prefix: only the last message sent before may grow
        if previous:
            assert sent[: len(previous) - 1] == previous[:-1]
            assert sent[len(previous) - 1].content.startswith(previous[-1].content)
        previous = sent
    assert history == kept
