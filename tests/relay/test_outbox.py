"""The outbox's states move forward only, and a repeat changes nothing (pure, no I/O)."""

from __future__ import annotations

import pytest

from tests.relay.wire_fakes import ME, SENDER
from zcoder.relay.outbox import CARD_KEYS, GONE, Outbox, Sent, card_meta, moves, rank, standing
from zcoder.relay.receipt_states import FINAL_STATES

MID = f"{ME}-3"


def sent_box() -> Outbox:
    box = Outbox(clock=lambda: 100.0)
    box.record(MID, SENDER, "digest (pid 1)", "update weeklyDigest.ts", receipts=True)
    return box


def test_the_order_is_accepted_held_started_then_final() -> None:
    assert rank("accepted") < rank("held") < rank("started")
    assert {rank(state) for state in FINAL_STATES} == {rank("started") + 1}


def test_a_repeated_state_changes_nothing() -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, "held", "waits", "") is not None
    assert all(box.apply(MID, SENDER, "held", "again", "") is None for _ in range(1000))
    assert box.apply(MID, SENDER, "started", "", "") is not None
    assert all(box.apply(MID, SENDER, "started", "", "") is None for _ in range(1000))
    sent = box.get(MID)
    assert sent is not None and (sent.state, sent.detail) == ("started", "")


def test_held_after_started_does_not_move_the_state_back() -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, "started", "", "") is not None
    assert box.apply(MID, SENDER, "held", "held now", "") is None
    assert box.get(MID).state == "started"  # type: ignore[union-attr]


def test_a_running_task_waits_and_goes_on_as_often_as_its_receiver_asks() -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, "started", "", "") is not None
    for n in range(3):
        waiting = box.apply(MID, SENDER, "waiting", f"asks its user to approve: make {n}", "")
        assert waiting is not None and waiting.detail == f"asks its user to approve: make {n}"
        assert box.apply(MID, SENDER, "waiting", "a retry", "") is None  # a repeat
        assert box.apply(MID, SENDER, "held", "late", "") is None  # never back before start
        going_on = box.apply(MID, SENDER, "started", "its user approved", "")
        assert going_on is not None and going_on.state == "started"
    assert box.apply(MID, SENDER, "completed", "done", "") is not None
    assert box.apply(MID, SENDER, "waiting", "too late", "") is None
    assert box.get(MID).state == "completed"  # type: ignore[union-attr]


def test_waiting_may_come_first_when_started_was_lost() -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, "held", "it holds", "") is not None
    assert box.apply(MID, SENDER, "waiting", "asks its user", "") is not None


@pytest.mark.parametrize("word", ["input_required", "paused", "x"])
def test_a_state_this_version_does_not_know_changes_nothing(word: str) -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, word, "from a newer zcoder", "") is None
    assert box.apply(MID, SENDER, "started", "", "") is not None
    assert box.apply(MID, SENDER, word, "from a newer zcoder", "") is None
    assert box.get(MID).state == "started"  # type: ignore[union-attr]
    assert not moves("completed", word) and not moves("accepted", word)


def test_moves_is_the_forward_order_with_started_and_waiting_side_by_side() -> None:
    assert moves("accepted", "held") and moves("held", "started") and moves("started", "failed")
    assert moves("started", "waiting") and moves("waiting", "started")
    assert not moves("waiting", "waiting") and not moves("started", "held")
    assert moves("waiting", "completed") and not moves("completed", "started")


@pytest.mark.parametrize("final", sorted(FINAL_STATES))
def test_a_final_state_is_terminal(final: str) -> None:
    box = sent_box()
    assert box.apply(MID, SENDER, final, "the end", "") is not None
    for state in ("held", "started", "waiting", *sorted(FINAL_STATES)):
        assert box.apply(MID, SENDER, state, "later", "x.py") is None
    sent = box.get(MID)
    assert sent is not None and (sent.state, sent.detail, sent.changed) == (final, "the end", "")


def test_a_message_may_skip_ahead() -> None:
    box = sent_box()  # no held, no started: a withdrawn or dropped message
    assert box.apply(MID, SENDER, "dropped", "", "") is not None
    box.record(f"{ME}-4", SENDER, "d", "b", receipts=True)
    assert box.apply(f"{ME}-4", SENDER, "started", "", "") is not None


def test_numbers_stay_with_their_message_when_old_ones_are_trimmed() -> None:
    box = Outbox(clock=lambda: 1.0, limit=2)
    for n in (1, 2, 3):
        box.record(f"{ME}-{n}", SENDER, "d", f"task {n}", receipts=True)
    assert [(s.number, s.first_line) for s in box.entries()] == [(2, "task 2"), (3, "task 3")]
    assert box.numbered(3) is box.get(f"{ME}-3")
    assert box.numbered(1) is None
    assert box.record(f"{ME}-3", SENDER, "d", "again", receipts=True).number == 3  # a repeat


def test_a_receiver_that_left_without_a_final_state_shows_gone() -> None:
    def sent(state: str, receipts: bool = True) -> Sent:
        return Sent(MID, SENDER, "d", "t", 0.0, receipts, 1, state=state)

    assert standing(sent("started"), receiver_gone=True) == GONE
    assert standing(sent("accepted"), receiver_gone=True) == GONE
    assert standing(sent("started"), receiver_gone=False) == "started"
    assert standing(sent("completed"), receiver_gone=True) == "completed"  # it said so
    # A version-1 peer never reports: its messages were never expected to end.
    assert standing(sent("accepted", receipts=False), receiver_gone=True) == "accepted"


def test_a_restored_message_keeps_its_number_and_says_it_is_from_an_earlier_run() -> None:
    box = Outbox(clock=lambda: 500.0)
    box.restore(f"{ME}-1", SENDER, "d (pid 1)", "first", receipts=True, at=10.0)
    box.restore(f"{ME}-2", SENDER, "d (pid 1)", "second", receipts=False, at=20.0)
    new = box.record(f"{ME}-3", SENDER, "d (pid 1)", "third", receipts=True)
    one, two, three = box.entries()
    assert [s.number for s in (one, two, three)] == [1, 2, 3]
    assert (one.earlier, one.sent_at, one.updated_at) == (True, 10.0, 10.0)
    assert not new.earlier and new.sent_at == 500.0
    assert box.apply(f"{ME}-1", SENDER, "started", "", "", at=30.0) is not None
    assert one.updated_at == 30.0


def test_a_send_card_keeps_what_the_outbox_needs() -> None:
    meta = card_meta(MID, SENDER, "d (pid 1)", "\n  update it  \nmore", receipts=True)
    assert meta == {
        "message_id": MID,
        "to": SENDER,
        "peer": "d (pid 1)",
        "first_line": "update it",
        "receipts": "yes",
    }
    numbered = card_meta(MID, SENDER, "d (pid 1)", "x", receipts=True, number=7)
    assert tuple(numbered) == CARD_KEYS and numbered["number"] == "7"
