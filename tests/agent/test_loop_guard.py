from __future__ import annotations

from zcoder.agent.loop_guard import TurnGuard, round_signature
from zcoder.conversation import ToolCall


def _read(path: str, call_id: str = "") -> ToolCall:
    return ToolCall("read_file", {"path": path}, id=call_id)


def test_signature_ignores_ids_and_key_order() -> None:
    a = [ToolCall("x", {"a": 1, "b": [1, 2]}, id="c1")]
    b = [ToolCall("x", {"b": [1, 2], "a": 1}, id="c2")]
    assert round_signature(a) == round_signature(b)
    assert round_signature(a) != round_signature([ToolCall("x", {"a": 2, "b": [1, 2]})])


def test_first_repeat_warns_then_stops() -> None:
    guard = TurnGuard()
    assert guard.check_round([_read("a.py")]) == "ok"
    assert guard.check_round([_read("a.py", "other-id")]) == "warn"
    assert guard.check_round([_read("a.py")]) == "stop"


def test_different_rounds_never_trigger() -> None:
    guard = TurnGuard()
    verdicts = [guard.check_round([_read(p)]) for p in ("a", "b", "a", "b", "c")]
    assert verdicts == ["ok"] * 5


def test_order_of_calls_matters() -> None:
    guard = TurnGuard()
    assert guard.check_round([_read("a"), _read("b")]) == "ok"
    assert guard.check_round([_read("b"), _read("a")]) == "ok"


def test_after_the_warning_any_later_repeat_stops() -> None:
    guard = TurnGuard()
    assert [guard.check_round([_read("a")]) for _ in range(2)] == ["ok", "warn"]
    assert guard.check_round([_read("b")]) == "ok"
    assert guard.check_round([_read("b")]) == "stop"


def test_empty_round_is_never_a_repeat() -> None:
    guard = TurnGuard()
    assert guard.check_round([]) == "ok"
    assert guard.check_round([]) == "ok"


def test_step_ceiling() -> None:
    guard = TurnGuard(max_steps=3)
    assert [guard.take_step() for _ in range(4)] == [True, True, True, False]
    assert guard.steps == 3


def test_nudges_are_bounded() -> None:
    guard = TurnGuard(max_nudges=2)
    assert [guard.take_nudge() for _ in range(3)] == [True, True, False]
