"""The finish tool: the model's explicit end of a turn. The agent loop acts on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec

__all__ = ["FINISH"]


async def _finish(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(text=args["response"], summary=args["status"])


FINISH = Tool(
    ToolSpec(
        name="finish",
        description=(
            "End your turn. Call it alone (no other tool call in the same reply) when the "
            "task is done (status 'complete') or when you cannot go on without help "
            "(status 'blocked'). 'response' is your final answer to the user: what you did "
            "and what remains, or exactly what is blocking you."
        ),
        parameters={
            "type": "object",
            "properties": {
                "status": {
                    "type": "string",
                    "enum": ["complete", "blocked"],
                    "description": "complete or blocked.",
                },
                "response": {"type": "string", "description": "Final answer to the user."},
            },
            "required": ["status", "response"],
        },
    ),
    _finish,
)
