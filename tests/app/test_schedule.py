"""The fair order (spec: one relayed message before each keyboard submission)."""

from __future__ import annotations

from zcoder.app.schedule import Next, QueueState, next_work
from zcoder.relay.inbound.policy import RoundTrips, hold_reason


def test_nothing_to_do_waits() -> None:
    assert next_work(QueueState(local=0, relay=False)) is None
    assert next_work(QueueState(local=0, relay=False, last_was_relay=True)) is None


def test_a_waiting_relayed_message_runs_before_the_next_local_item() -> None:
    assert next_work(QueueState(local=2, relay=True)) == "relay"


def test_after_a_relayed_turn_the_local_queue_goes_first() -> None:
    assert next_work(QueueState(local=1, relay=True, last_was_relay=True)) == "local"


def test_relayed_messages_run_back_to_back_when_nobody_typed() -> None:
    assert next_work(QueueState(local=0, relay=True, last_was_relay=True)) == "relay"


def test_held_or_paused_relayed_work_leaves_the_local_queue_to_run() -> None:
    assert next_work(QueueState(local=1, relay=False)) == "local"


def simulate(local: int, relayed: int) -> list[Next]:
    """Run the policy over a queue that nothing adds to: the order of the items."""
    order: list[Next] = []
    last = False
    while (choice := next_work(QueueState(local, relayed > 0, last))) is not None:
        order.append(choice)
        local -= choice == "local"
        relayed -= choice == "relay"
        last = choice == "relay"
    return order


def test_three_relays_and_two_prompts_take_turns() -> None:
    # Issue 8: three queued relays all ran before a prompt typed before the third arrived.
    assert simulate(local=2, relayed=3) == ["relay", "local", "relay", "local", "relay"]


def held(
    mode: str = "accept", *, verified: bool = True, hops: int | None = None, trips: int = 0
) -> str:
    assert mode in ("accept", "hold")
    return hold_reason(
        "hold" if mode == "hold" else "accept",
        verified=verified,
        hops=hops,
        round_trips=trips,
        max_hops=4,
    )


def test_an_unverified_sender_is_always_held() -> None:
    assert held(verified=False) == "unverified"
    assert held("hold", verified=False) == "unverified"


def test_hold_mode_holds_every_message_and_accept_runs_them() -> None:
    assert held("hold") == "hold"
    assert held() == ""


def test_the_hop_bound_holds_a_loop_and_one_way_work_runs() -> None:
    assert held(hops=0) == "" and held(hops=3) == ""
    assert held(hops=4) == "hops" and held(hops=9) == "hops"
    assert held(hops=0, trips=10) == ""  # a hop count says more than the round trips


def test_without_a_hop_count_round_trips_are_the_bound() -> None:
    assert held(trips=3) == ""
    assert held(trips=4) == "round_trips"


def test_round_trips_count_per_peer_and_start_over() -> None:
    trips = RoundTrips()
    assert trips.add("a") == 1 and trips.add("a") == 2 and trips.add("b") == 1
    trips.reset("a")
    assert (trips.count("a"), trips.count("b")) == (0, 1)
    trips.local_turn()
    assert trips.count("b") == 0
