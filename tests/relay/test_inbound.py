"""The inbound state machine (``Inbound``): pure transitions and the typed effects they
return (their wording: ``tests/ui/test_inbound_text.py``).

No Trio, no disk: envelopes, ``Arrived`` and ``Claimed`` records are built directly, and
the clock is injected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zcoder.errors import CommandError
from zcoder.relay.envelope import Enqueue
from zcoder.relay.inbound import (
    Approved,
    Denied,
    Dropped,
    Effect,
    Held,
    Inbound,
    InboxRow,
    ModeSet,
    PutBack,
    Remove,
    Settle,
    Tell,
    WaitsForModel,
    Withdrawn,
    sender_label,
)
from zcoder.relay.settings import InboundMode
from zcoder.relay.spool.news import Arrived, Claimed

ALPHA = "101-a1b2c3d4"
BETA = "202-0badf00d"


class Clock:
    """A settable clock."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def envelope(
    n: int, *, sender: str = ALPHA, project: str = "alpha", body: str = "", hops: int | None = None
) -> Enqueue:
    return Enqueue(
        protocol=1,
        type="enqueue",
        message_id=f"{sender}-{n}",
        target_instance_id="303-feedc0de",
        sender_instance_id=sender,
        sender_pid=int(sender.split("-", 1)[0]),
        sender_project=project,
        sender_workspace="/work/sender",
        body=body or f"task {n}",
        created_at=1788012245,
        hops=hops,
    )


def mid(n: int, sender: str = ALPHA) -> str:
    return f"{sender}-{n}"


def arrive(
    inbound: Inbound,
    n: int,
    *,
    sequence: int | None = None,
    verified: bool = True,
    sender: str = ALPHA,
    project: str = "alpha",
    body: str = "",
    hops: int | None = None,
) -> list[Effect]:
    env = envelope(n, sender=sender, project=project, body=body, hops=hops)
    return list(inbound.arrived(Arrived(n if sequence is None else sequence, env, verified)))


def claim(inbound: Inbound, n: int, *, sender: str = ALPHA, verified: bool = True) -> Claimed:
    """Claim message ``n`` (as the spool would, or planted when the machine never knew it)."""
    claimed = Claimed(n, envelope(n, sender=sender), verified, Path(f"/spool/processing/{n}"))
    inbound.claimed(claimed)
    return claimed


def row(inbound: Inbound, number: int) -> InboxRow:
    return next(r for r in inbound.inbox().rows if r.number == number)


def ids(inbound: Inbound) -> list[str]:
    return [e.message_id for e in inbound.unrun()]


def make(mode: InboundMode = "accept", *, clock: Clock | None = None, max_hops: int = 4) -> Inbound:
    return Inbound(mode, clock=clock or Clock(), max_hops=max_hops)


# -- arrival --------------------------------------------------------------------------------


def test_an_arrival_in_accept_mode_waits_silently_and_is_runnable() -> None:
    inbound = make()
    assert not inbound.runnable()
    assert arrive(inbound, 1) == []
    assert inbound.runnable()
    assert (inbound.waiting(), inbound.held()) == (1, 0)
    assert inbound.skip() == frozenset()
    assert ids(inbound) == [mid(1)]
    assert inbound.number(mid(1)) == 1
    assert inbound.running is None


def test_an_arrival_in_hold_mode_is_held_told_and_announced() -> None:
    inbound = make("hold")
    effects = arrive(inbound, 1)
    assert effects == [
        Tell(envelope(1), "held", "it holds every relayed message"),
        Held(1, "alpha (pid 101)", "hold", None, 4),
    ]
    assert not inbound.runnable()
    assert (inbound.waiting(), inbound.held()) == (1, 1)
    assert inbound.skip() == frozenset({mid(1)})


def test_an_unverified_sender_is_held_even_in_accept_mode() -> None:
    inbound = make()
    effects = arrive(inbound, 1, verified=False)
    assert len(effects) == 2
    tell, say = effects
    assert isinstance(tell, Tell) and tell.state == "held"
    assert "peer credentials did not verify" in tell.detail
    assert say == Held(1, "alpha (pid 101)", "unverified", None, 4)
    assert not inbound.runnable()
    assert inbound.skip() == frozenset({mid(1)})


def test_one_way_work_is_never_held_however_much() -> None:
    inbound = make(max_hops=2)
    for n in range(1, 11):  # ten tasks, none answered back to their sender
        assert arrive(inbound, n) == []
        claim(inbound, n)
        inbound.finished("done")
    assert arrive(inbound, 11, hops=0) == [] and inbound.runnable()


def test_a_message_whose_hop_count_reached_the_bound_is_held() -> None:
    inbound = make(max_hops=4)
    assert arrive(inbound, 1, hops=3) == []
    effects = arrive(inbound, 2, hops=4)
    assert [type(e) for e in effects] == [Tell, Held]
    tell = effects[0]
    assert isinstance(tell, Tell) and tell.state == "held"
    assert tell.detail == "4 relayed turns led to it (it holds from 4)"
    assert inbound.skip() == frozenset({mid(2)})


def test_round_trips_hold_a_peer_that_sends_no_hop_count() -> None:
    inbound = make(max_hops=2)
    for n in (1, 2):  # each relayed turn from ALPHA sent back to ALPHA: a round trip
        arrive(inbound, n)
        claim(inbound, n)
        inbound.sent_to(ALPHA)
        inbound.sent_to(ALPHA)  # a turn counts once
        inbound.finished("done")
    effects = arrive(inbound, 3)
    tell = effects[0]
    assert isinstance(tell, Tell) and tell.state == "held"
    assert tell.detail == "2 round trips with you since its user's last prompt"
    # Another sender is not bound by ALPHA's count; a hop count overrides the round trips.
    assert arrive(inbound, 4, sender=BETA) == []
    assert arrive(inbound, 5, hops=1) == []


def test_a_send_to_another_peer_is_no_round_trip() -> None:
    inbound = make(max_hops=1)
    arrive(inbound, 1)
    claim(inbound, 1)
    inbound.sent_to(BETA)  # work handed on, not a reply
    inbound.finished("done")
    inbound.sent_to(ALPHA)  # no relayed turn runs: not a reply either
    assert arrive(inbound, 2) == []


def test_a_local_turn_restarts_the_round_trip_counts() -> None:
    inbound = make(max_hops=1)
    arrive(inbound, 1)
    claim(inbound, 1)
    inbound.sent_to(ALPHA)
    inbound.finished("done")
    inbound.local_turn()
    assert arrive(inbound, 2) == []


def test_fifo_order_is_kept_around_held_messages() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2, verified=False)
    arrive(inbound, 3)
    assert ids(inbound) == [mid(1), mid(2), mid(3)]
    assert inbound.skip() == frozenset({mid(2)})
    assert (inbound.waiting(), inbound.held()) == (3, 1)
    claim(inbound, 1)
    inbound.finished("done")
    assert inbound.runnable()  # 3 may run, past the held 2
    assert ids(inbound) == [mid(2), mid(3)]
    claim(inbound, 3)
    inbound.finished("done")
    assert not inbound.runnable()
    assert ids(inbound) == [mid(2)] and inbound.held() == 1


# -- a relayed turn ---------------------------------------------------------------------------


def test_a_claimed_message_runs_and_nothing_else_is_runnable_meanwhile() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    claimed = claim(inbound, 1)
    assert inbound.running is claimed
    assert not inbound.runnable()
    assert ids(inbound) == [mid(2)] and inbound.waiting() == 1


def test_reached_tells_started_and_finished_settles_and_tells_the_final_state() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    claimed = claim(inbound, 1)
    assert inbound.reached() == [Tell(envelope(1), "started")]
    assert inbound.finished("completed", "all good", "2 files") == [
        Settle(claimed),
        Tell(envelope(1), "completed", "all good", "2 files"),
    ]
    assert inbound.running is None
    assert ids(inbound) == [mid(2)]
    assert inbound.runnable()
    assert inbound.number(mid(1)) == 1  # still known, for "no longer waits"


def test_a_question_tells_waiting_once_and_started_again_when_the_turn_goes_on() -> None:
    inbound = make()
    arrive(inbound, 1)
    claim(inbound, 1)
    inbound.reached()
    why = "asks its user to approve: make test"
    assert inbound.asking(why) == [Tell(envelope(1), "waiting", why)]
    assert inbound.asking("a second question at once") == []  # told once until it goes on
    assert inbound.answered("its user approved") == [
        Tell(envelope(1), "started", "its user approved")
    ]
    assert inbound.answered("again") == []  # nothing was asked since
    assert inbound.asking("the next command") == [Tell(envelope(1), "waiting", "the next command")]
    assert [e.state for e in inbound.finished("cancelled") if isinstance(e, Tell)] == ["cancelled"]


def test_once_a_question_expired_the_turn_is_unattended_until_the_next_message() -> None:
    inbound = make()
    assert not inbound.unattended  # nothing runs
    arrive(inbound, 1)
    arrive(inbound, 2)
    claim(inbound, 1)
    inbound.asking("make test")
    inbound.answered("its user approved")
    assert not inbound.unattended  # answered: someone is there
    inbound.asking("make lint")
    assert inbound.answered("nobody answered in 2 s", expired=True) == [
        Tell(envelope(1), "started", "nobody answered in 2 s")
    ]
    assert inbound.unattended
    inbound.finished("completed")
    assert not inbound.unattended
    claim(inbound, 2)
    assert not inbound.unattended  # the next task asks again


def test_a_question_after_the_turn_ended_or_of_the_next_message_starts_afresh() -> None:
    inbound = make()
    assert inbound.asking("no relayed turn runs") == []  # a local turn's question
    assert inbound.answered("nor here") == []
    arrive(inbound, 1)
    arrive(inbound, 2)
    claim(inbound, 1)
    inbound.asking("stopped while it asks")
    inbound.finished("cancelled")  # its final state is the sender's news, not ``started``
    assert inbound.answered("late") == []
    claim(inbound, 2)
    assert inbound.answered("never asked") == []
    assert inbound.asking("its own question") == [Tell(envelope(2), "waiting", "its own question")]


def test_abandoned_only_settles() -> None:
    inbound = make()
    arrive(inbound, 1)
    claimed = claim(inbound, 1)
    assert inbound.abandoned() == [Settle(claimed)]
    assert inbound.running is None
    assert inbound.waiting() == 0 and not inbound.runnable()


def test_turn_transitions_without_a_running_message_are_errors() -> None:
    inbound = make()
    for transition in (inbound.reached, inbound.abandoned, inbound.unreached, inbound.put_back):
        with pytest.raises(RuntimeError):
            transition()
    with pytest.raises(RuntimeError):
        inbound.finished("done")


def test_an_unreached_turn_is_put_back_first_and_waits_for_the_model() -> None:
    inbound = make()
    arrive(inbound, 1)
    claimed = claim(inbound, 1)
    assert inbound.unreached() == PutBack(claimed)
    assert inbound.running is claimed  # until the spool answers
    assert not inbound.runnable()
    arrive(inbound, 2)  # newer messages arrive meanwhile
    arrive(inbound, 3)
    assert inbound.put_back("") == [WaitsForModel("alpha (pid 101)")]
    assert inbound.running is None
    assert ids(inbound) == [mid(1), mid(2), mid(3)]  # first again, by sequence
    assert inbound.waits_for_model()
    assert not inbound.runnable()
    inbound.model_answered()
    assert not inbound.waits_for_model()
    assert inbound.runnable()


def test_a_put_back_message_keeps_its_number_and_its_age() -> None:
    clock = Clock()
    inbound = make(clock=clock)
    arrive(inbound, 1)
    arrive(inbound, 2)
    claim(inbound, 1)
    inbound.unreached()
    clock.now += 3 * 3600
    arrive(inbound, 3)
    inbound.put_back("")
    assert inbound.number(mid(1)) == 1
    rows = inbound.inbox().rows
    assert [(r.number, r.held) for r in rows] == [(1, False), (2, False), (3, False)]
    assert inbound.inbox().now - rows[0].seen == 3 * 3600
    assert inbound.inbox().now - rows[2].seen == 0
    assert inbound.approve("1") == Approved(row(inbound, 1), was_held=False)


def test_reaching_the_model_ends_waiting_for_it() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    claim(inbound, 1)
    inbound.unreached()
    inbound.put_back("")
    assert not inbound.runnable()
    # The put-back message is claimed again (as by a retry) and this time reaches the model.
    claim(inbound, 1)
    assert [e.state for e in inbound.reached() if isinstance(e, Tell)] == ["started"]
    inbound.finished("done")
    assert not inbound.waits_for_model()
    assert inbound.runnable()
    assert ids(inbound) == [mid(2)]


def test_a_message_that_cannot_be_put_back_is_dropped() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    claimed = claim(inbound, 1)
    inbound.unreached()
    assert inbound.put_back("disk full") == [
        Settle(claimed),
        Tell(envelope(1), "dropped", "it could not be put back: disk full"),
        Dropped("disk full"),
    ]
    assert inbound.running is None
    assert ids(inbound) == [mid(2)]
    assert not inbound.waits_for_model()
    assert inbound.runnable()


def test_a_claim_that_finds_nothing_is_stale_until_something_changes() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    arrive(inbound, 3, verified=False)
    inbound.claimed(None)
    assert not inbound.runnable()
    arrive(inbound, 4)
    assert inbound.runnable()

    inbound.claimed(None)
    inbound.left(mid(4))
    assert inbound.runnable()

    inbound.claimed(None)
    inbound.changed()
    assert inbound.runnable()

    inbound.claimed(None)
    inbound.approve("3")
    assert inbound.runnable()


def test_a_planted_message_is_adopted_and_numbered() -> None:
    inbound = make()
    arrive(inbound, 1)
    planted = claim(inbound, 7, sender=BETA)
    assert inbound.running is planted
    assert inbound.number(mid(7, BETA)) == 2
    assert ids(inbound) == [mid(1)]
    assert inbound.reached() == [Tell(planted.envelope, "started")]
    assert inbound.finished("done") == [Settle(planted), Tell(planted.envelope, "done")]
    arrive(inbound, 2)
    assert inbound.number(mid(2)) == 3


def test_a_planted_message_put_back_waits_in_sequence_order_with_its_number() -> None:
    inbound = make()
    arrive(inbound, 5, sequence=5)
    arrive(inbound, 6, sequence=6)
    planted = Claimed(2, envelope(2, sender=BETA), True, Path("/p"))
    inbound.claimed(planted)
    inbound.unreached()
    inbound.put_back("")
    assert ids(inbound) == [mid(2, BETA), mid(5), mid(6)]
    assert inbound.number(mid(2, BETA)) == 3
    assert inbound.inbox().rows[0].number == 3


# -- numbers, approve, deny -------------------------------------------------------------------


def test_numbers_are_stable_while_others_run() -> None:
    inbound = make("hold")
    for n in (1, 2, 3):
        arrive(inbound, n)
    inbound.approve("1")
    claim(inbound, 1)
    inbound.finished("done")
    assert inbound.number(mid(3)) == 3
    approved = inbound.approve("3")
    assert (approved.row.number, approved.was_held) == (3, True)
    assert inbound.skip() == frozenset({mid(2)})
    arrive(inbound, 4)
    assert inbound.number(mid(4)) == 4
    assert [row.number for row in inbound.inbox().rows] == [2, 3, 4]


def test_approve_of_a_message_that_no_longer_waits_is_refused() -> None:
    inbound = make("hold")
    arrive(inbound, 1)
    arrive(inbound, 2)
    inbound.approve("1")
    claim(inbound, 1)
    inbound.finished("done")
    with pytest.raises(CommandError, match="relayed message 1 no longer waits"):
        inbound.approve("1")
    with pytest.raises(CommandError, match="relayed message 1 no longer waits"):
        inbound.approve(mid(1))
    with pytest.raises(CommandError, match="relayed message 1 no longer waits"):
        inbound.deny("1")
    assert inbound.held() == 1  # 2 was not approved in 1's place


def test_approve_of_the_running_message_is_refused() -> None:
    inbound = make()
    arrive(inbound, 1)
    claim(inbound, 1)
    with pytest.raises(CommandError, match="no longer waits"):
        inbound.approve("1")


def test_an_unknown_number_lists_the_waiting_ones() -> None:
    inbound = make("hold")
    arrive(inbound, 1)
    arrive(inbound, 2)
    with pytest.raises(CommandError) as info:
        inbound.approve("9")
    assert "/agents approve N" in str(info.value) and "waiting: 1, 2" in str(info.value)
    with pytest.raises(CommandError, match="waiting: 1, 2"):
        inbound.deny("nonsense")


def test_an_unknown_number_with_none_waiting_says_so() -> None:
    inbound = make()
    with pytest.raises(CommandError, match="none waits"):
        inbound.approve("1")


def test_approve_by_message_id() -> None:
    inbound = make("hold")
    arrive(inbound, 1)
    arrive(inbound, 2)
    approved = inbound.approve(mid(2))
    assert (approved.row.message_id, approved.was_held) == (mid(2), True)
    assert inbound.skip() == frozenset({mid(1)})
    assert inbound.held() == 1
    assert inbound.runnable()


def test_approve_of_a_message_not_held_changes_nothing() -> None:
    inbound = make()
    arrive(inbound, 1)
    assert inbound.approve("1") == Approved(row(inbound, 1), was_held=False)
    assert (inbound.waiting(), inbound.held()) == (1, 0)


def test_approve_restarts_the_senders_round_trip_count() -> None:
    inbound = make(max_hops=1)
    arrive(inbound, 1)
    claim(inbound, 1)
    inbound.sent_to(ALPHA)
    inbound.finished("done")
    arrive(inbound, 2)  # held: the bound was reached
    assert inbound.skip() == frozenset({mid(2)})
    inbound.approve("2")
    assert arrive(inbound, 3) == []  # the count started over
    claim(inbound, 2)
    inbound.sent_to(ALPHA)
    inbound.finished("done")
    assert [type(e) for e in arrive(inbound, 4)] == [Tell, Held]  # counting again


def test_deny_then_removed_forgets_the_message_and_tells_denied() -> None:
    inbound = make("hold")
    arrive(inbound, 1, project="alpha")
    arrive(inbound, 2)
    assert inbound.deny("1") == Remove(mid(1))
    assert inbound.waiting() == 2  # until the spool removed it
    denied, effects = inbound.removed(mid(1))
    assert denied == Denied(1, "alpha (pid 101)")
    assert effects == [Tell(envelope(1), "denied")]
    assert (inbound.waiting(), inbound.held()) == (1, 1)
    assert ids(inbound) == [mid(2)]
    with pytest.raises(CommandError, match="no longer waits"):
        inbound.deny("1")


def test_deny_by_message_id_and_of_a_queued_message() -> None:
    inbound = make()
    arrive(inbound, 1)
    assert inbound.deny(mid(1)) == Remove(mid(1))
    inbound.removed(mid(1))
    assert inbound.waiting() == 0 and not inbound.runnable()


def test_removed_of_an_unknown_message_is_refused() -> None:
    inbound = make()
    with pytest.raises(CommandError, match=f"relayed message {mid(5)} no longer waits"):
        inbound.removed(mid(5))


# -- the inbound policy ---------------------------------------------------------------------


def test_hold_mode_holds_every_waiting_message_once() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2, verified=False)  # already held
    arrive(inbound, 3)
    mode, effects = inbound.set_mode("hold")
    assert inbound.mode == "hold"
    assert effects == [
        Tell(envelope(1), "held", "it holds every relayed message"),
        Tell(envelope(3), "held", "it holds every relayed message"),
    ]
    assert mode == ModeSet("hold", held=3, waiting=3)
    assert inbound.held() == 3 and not inbound.runnable()
    assert inbound.skip() == frozenset({mid(1), mid(2), mid(3)})
    assert inbound.set_mode("hold")[1] == []  # nothing newly held


def test_hold_mode_does_not_touch_the_running_message() -> None:
    inbound = make()
    arrive(inbound, 1)
    claimed = claim(inbound, 1)
    assert inbound.set_mode("hold")[1] == []
    assert inbound.running is claimed
    assert [type(e) for e in arrive(inbound, 2)] == [Tell, Held]


def test_accept_mode_mentions_the_held_messages_still_waiting() -> None:
    inbound = make("hold")
    arrive(inbound, 1)
    arrive(inbound, 2)
    mode, effects = inbound.set_mode("accept")
    assert inbound.mode == "accept"
    assert effects == []
    assert mode == ModeSet("accept", held=2, waiting=2)
    assert inbound.held() == 2 and not inbound.runnable()
    assert arrive(inbound, 3) == []
    assert inbound.runnable()


def test_accept_mode_with_nothing_held() -> None:
    inbound = make()
    assert inbound.set_mode("accept") == (ModeSet("accept", held=0, waiting=0), [])


def test_an_unknown_mode_is_refused() -> None:
    inbound = make()
    with pytest.raises(CommandError, match="unknown inbound policy 'maybe'"):
        inbound.set_mode("maybe")
    assert inbound.mode == "accept"


# -- Escape and /agents resume --------------------------------------------------------------


def test_stop_with_waiting_messages_stops_claims_until_go_on() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2)
    assert inbound.stop() == 2
    assert inbound.stopped
    assert not inbound.runnable()
    # /agents inbox says what the status bar says: relayed work is stopped.
    assert inbound.inbox().stopped
    arrive(inbound, 3)
    assert not inbound.runnable()
    assert inbound.go_on() is True
    assert not inbound.stopped
    assert inbound.runnable()
    assert inbound.go_on() is False
    assert not inbound.inbox().stopped


def test_stop_with_nothing_waiting_stops_nothing() -> None:
    inbound = make()
    assert inbound.stop() == 0
    assert not inbound.stopped
    arrive(inbound, 1)
    assert inbound.runnable()
    assert inbound.go_on() is False


# -- messages that leave on their own -------------------------------------------------------


def test_left_forgets_a_waiting_or_held_message() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2, verified=False)
    arrive(inbound, 3)
    inbound.left(mid(2))
    assert (inbound.waiting(), inbound.held()) == (2, 0)
    assert inbound.skip() == frozenset()
    inbound.left(mid(1))
    assert ids(inbound) == [mid(3)] and inbound.runnable()
    inbound.left(mid(1))  # twice, or never known: nothing
    inbound.left(mid(99))
    assert inbound.waiting() == 1
    with pytest.raises(CommandError, match="relayed message 2 no longer waits"):
        inbound.approve("2")


def test_a_withdrawn_message_is_forgotten_told_cancelled_and_shown() -> None:
    inbound = make()
    arrive(inbound, 1)
    arrive(inbound, 2, verified=False)
    inbound.claimed(None)  # stale: a withdrawal is a change
    assert inbound.withdrawn(mid(2)) == [
        Tell(envelope(2), "cancelled", "withdrawn by its sender before it ran"),
        Withdrawn(2, mid(2), "alpha (pid 101)"),
    ]
    assert (inbound.waiting(), inbound.held()) == (1, 0) and inbound.runnable()
    assert inbound.withdrawn(mid(2)) == []  # told once
    assert inbound.withdrawn(mid(9)) == []  # never known here
    with pytest.raises(CommandError, match="relayed message 2 no longer waits"):
        inbound.approve("2")


def test_waits_for_model_only_while_messages_wait() -> None:
    inbound = make()
    arrive(inbound, 1)
    claim(inbound, 1)
    inbound.unreached()
    inbound.put_back("")
    assert inbound.waits_for_model()
    inbound.left(mid(1))
    assert not inbound.waits_for_model()


# -- /agents inbox --------------------------------------------------------------------------


def test_the_inbox_with_nothing_waiting() -> None:
    view = make("hold").inbox()
    assert (view.mode, view.stopped, view.rows) == ("hold", False, ())


def test_the_inbox_lists_oldest_first_with_state_check_arrival_and_body() -> None:
    clock = Clock()
    inbound = make(clock=clock)
    arrive(inbound, 1, body="  fix the build\nthen test")
    arrival = clock.now
    clock.now += 10 * 60
    arrive(inbound, 2, verified=False, sender=BETA, project="beta", body="x" * 100)
    clock.now += 30
    view = inbound.inbox()
    assert view.now == clock.now
    assert view.rows == (
        InboxRow(
            1,
            False,
            "alpha (pid 101)",
            True,
            arrival,
            "  fix the build\nthen test",
            mid(1),
        ),
        InboxRow(2, True, "beta (pid 202)", False, arrival + 600, "x" * 100, mid(2, BETA)),
    )


def test_a_sender_label_is_raw_it_is_escaped_where_shown() -> None:
    assert sender_label(envelope(1, project="p\x1b")) == "p\x1b (pid 101)"


def test_show_returns_one_waiting_message_whole_and_changes_nothing() -> None:
    clock = Clock()
    inbound = make("hold", clock=clock)
    body = "Tidy the docs.\nThen delete the build directory"
    arrive(inbound, 1, body=body)
    arrive(inbound, 2)
    clock.now += 5
    shown = inbound.show("1")
    assert shown.row == row(inbound, 1) and shown.row.body == body and shown.row.held
    assert shown.now == clock.now
    assert inbound.show(mid(1)) == shown  # by id too
    inbound.approve("1")
    assert not inbound.show("1").row.held
    assert inbound.skip() == frozenset({mid(2)})  # showing changed nothing


def test_show_of_a_message_that_no_longer_waits_is_refused() -> None:
    inbound = make("hold")
    arrive(inbound, 1)
    inbound.approve("1")
    claim(inbound, 1)
    with pytest.raises(CommandError, match="relayed message 1 no longer waits"):
        inbound.show("1")
    with pytest.raises(CommandError, match=r"/agents show N: N is a number .* \(none waits\)"):
        inbound.show("7")


# -- cost -----------------------------------------------------------------------------------


def test_in_order_arrivals_append_without_rebuilding_the_index() -> None:
    inbound = make()
    for n in range(1, 1001):
        arrive(inbound, n)
    index = inbound._waiting
    arrive(inbound, 1001)
    claim(inbound, 1)
    inbound.finished("done")
    inbound.left(mid(2))
    assert inbound._waiting is index  # appended and popped in place, never re-sorted
    assert ids(inbound)[:2] == [mid(3), mid(4)] and ids(inbound)[-1] == mid(1001)
    assert inbound.waiting() == 999
    # A put-back message goes to its place by sequence.
    claim(inbound, 3)
    inbound.unreached()
    inbound.put_back("")
    assert ids(inbound)[:2] == [mid(3), mid(4)] and inbound.waiting() == 999


def test_approve_of_a_superscript_digit_is_a_command_error() -> None:
    # str.isdigit() accepts "²", which int() refuses.
    inbound = make("hold")
    arrive(inbound, 1)
    with pytest.raises(CommandError):
        inbound.approve("²")
