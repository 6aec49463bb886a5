"""The fair order (spec: one relayed message before each keyboard submission)."""

from __future__ import annotations

from zcoder.app.schedule import EXCHANGE_BOUND, Exchanges, Next, QueueState, hold_reason, next_work


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


def test_an_unverified_sender_is_always_held() -> None:
    assert hold_reason("accept", verified=False, exchanges=0) == "unverified"
    assert hold_reason("hold", verified=False, exchanges=0) == "unverified"


def test_hold_mode_holds_every_message_and_accept_runs_them() -> None:
    assert hold_reason("hold", verified=True, exchanges=0) == "hold"
    assert hold_reason("accept", verified=True, exchanges=0) == ""


def test_the_exchange_bound_holds_the_next_message() -> None:
    assert hold_reason("accept", verified=True, exchanges=EXCHANGE_BOUND - 1) == ""
    assert hold_reason("accept", verified=True, exchanges=EXCHANGE_BOUND) == "bound"
    assert hold_reason("accept", verified=True, exchanges=2, bound=2) == "bound"


def test_exchanges_count_per_peer_and_a_local_turn_resets_them_all() -> None:
    seen = Exchanges()
    assert [seen.add("p1"), seen.add("p1"), seen.add("p2")] == [1, 2, 1]
    seen.reset("p1")
    assert (seen.count("p1"), seen.count("p2")) == (0, 1)
    seen.add("p1")
    seen.local_turn()
    assert (seen.count("p1"), seen.count("p2")) == (0, 0)
