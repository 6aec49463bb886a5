"""``/context``: what fills the context window, in lines for the screen (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zcoder.agent.compaction import Sizes
from zcoder.agent.context import Calibration, message_tokens, tools_tokens
from zcoder.conversation import Message
from zcoder.text.counts import counted

__all__ = ["context_report"]

_LARGEST = 3


def context_report(
    sizes: Sizes,
    fixed_estimate: int,
    history: Sequence[Message],
    server_kind: str,
    tools: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """The window and who set it, the threshold, and the parts of the next request.

    ``tools`` are the request's tool schemas: each MCP server's (``mcp__<server>__<tool>``)
    gets a line of its own, as the system prompt and tools part includes them.
    """
    budget, calibration = sizes.budget, sizes.calibration
    window = budget.window
    total = sizes.prompt(history)
    fixed = calibration.tokens(fixed_estimate)
    lines = [
        f"window        {counted(window.tokens, 'token')} ({window.source}; {server_kind})",
        f"compaction    at {budget.compact_at}% = {counted(budget.threshold, 'token')} "
        "(--compact-at changes it)",
        f"in use        about {counted(total, 'token')} ({budget.percent(total)}%), "
        f"{max(0, window.tokens - total):,} free",
        f"  system prompt and tools  {fixed:,}",
        f"  history                  {max(0, total - fixed):,} in "
        f"{counted(len(history), 'message')}",
    ]
    lines.extend(_mcp_lines(tools, calibration))
    results = sorted(
        ((calibration.part(message_tokens(m)), m.tool_name) for m in history if m.role == "tool"),
        reverse=True,
    )[:_LARGEST]
    if results:
        largest = ", ".join(f"{name} {tokens:,}" for tokens, name in results)
        lines.append(f"  largest tool results     {largest}")
    if calibration.anchor is not None:
        lines.append(
            f"measured      the server counted {counted(calibration.anchor[1], 'prompt token')} "
            "in the last request; sizes are calibrated to it"
        )
    else:
        lines.append("measured      not yet: sizes are estimates until the server counts a request")
    return lines


def _mcp_lines(tools: Sequence[Mapping[str, Any]], calibration: Calibration) -> list[str]:
    """One line a server: what its tool schemas cost, estimated like the fixed part."""
    by_server: dict[str, list[Mapping[str, Any]]] = {}
    for spec in tools:
        parts = str(spec.get("function", {}).get("name", "")).split("__", 2)
        if len(parts) == 3 and parts[0] == "mcp" and parts[1]:
            by_server.setdefault(parts[1], []).append(spec)
    lines = []
    for server, specs in by_server.items():
        tokens = calibration.part(tools_tokens(specs))
        lines.append(
            f"  mcp {server}  about {counted(tokens, 'token')} in {counted(len(specs), 'tool')}"
        )
    return lines
