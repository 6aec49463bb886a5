"""The compaction plan (``agent/compaction.py``): pure, no Trio."""

from __future__ import annotations

from zcoder.agent.compaction import Sizes, compacted_history, plan_compaction
from zcoder.agent.context import Budget, Calibration, Window
from zcoder.conversation import Message, ToolCall


def test_an_earlier_summary_alone_is_not_summarised_again() -> None:
    # Found by bench/compaction.py: mid-turn, with only the last compaction's record before
    # the current exchange, a second compaction asked the model to summarise that record
    # again (a request for nothing: 3,541 -> 3,563 tokens).
    record = compacted_history("Requests: fix the weekly digest. " * 15, [], [])
    current = [
        Message("user", "Change the digest"),
        Message("assistant", "", tool_calls=(ToolCall("read_file", {"path": "d.py"}),)),
        Message("tool", "x" * 3000, tool_name="read_file"),
        Message("assistant", "", tool_calls=(ToolCall("run_command", {"command": "pytest"}),)),
        Message("tool", "y" * 3000, tool_name="run_command"),
    ]
    history = [*record, *current]
    sizes = Sizes(Calibration(), Budget(Window(4096)), fixed_estimate=1200)
    assert sizes.budget.needs_compaction(sizes.prompt(history))
    plan = plan_compaction(history, sizes)
    assert not plan.summarises and plan.chunks == ()
    # the current exchange's older result gives instead; the record and the last result stay
    assert plan.after < plan.before
    assert plan.history[:2] == tuple(record) and plan.history[-1] == current[-1]
    assert len(plan.history[4].content) < 3000
    # /compact still summarises when asked
    assert plan_compaction(history, sizes, force=True).summarises
