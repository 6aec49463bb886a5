"""``/context``: what fills the context window, in lines for the screen (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from zcoder.agent.compaction import Sizes
from zcoder.agent.context import message_tokens
from zcoder.conversation import Message

__all__ = ["context_report"]

_LARGEST = 3


def context_report(
    sizes: Sizes, fixed_estimate: int, history: Sequence[Message], server_kind: str
) -> list[str]:
    """The window and who set it, the threshold, and the parts of the next request."""
    budget, calibration = sizes.budget, sizes.calibration
    window = budget.window
    total = sizes.prompt(history)
    fixed = calibration.tokens(fixed_estimate)
    lines = [
        f"window        {window.tokens:,} tokens ({window.source}; {server_kind})",
        f"compaction    at {budget.compact_at}% = {budget.threshold:,} tokens "
        "(set by --compact-at)",
        f"in use        about {total:,} tokens ({budget.percent(total)}%), "
        f"{max(0, window.tokens - total):,} free",
        f"  system prompt and tools  {fixed:,}",
        f"  history                  {max(0, total - fixed):,} in {len(history)} messages",
    ]
    results = sorted(
        ((calibration.part(message_tokens(m)), m.tool_name) for m in history if m.role == "tool"),
        reverse=True,
    )[:_LARGEST]
    if results:
        largest = ", ".join(f"{name} {tokens:,}" for tokens, name in results)
        lines.append(f"  largest tool results     {largest}")
    if calibration.anchor is not None:
        lines.append(
            f"measured      the server counted {calibration.anchor[1]:,} prompt tokens "
            "in the last request; sizes are calibrated to it"
        )
    else:
        lines.append("measured      not yet: sizes are estimates until the server counts a request")
    return lines
