"""The fair order (spec: one relayed message before each keyboard submission)."""

from __future__ import annotations

from zcoder.app.schedule import Next, QueueState, next_work


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
