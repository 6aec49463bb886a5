"""What a tool is: its model-facing spec, its context, its result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from zcoder.conversation import ToolResult
from zcoder.sandbox.plan import Confinement

__all__ = ["DEFAULT_OUTPUT_CAP", "Asks", "Tool", "ToolContext", "ToolResult", "ToolSpec"]

DEFAULT_OUTPUT_CAP = 32768

# When a tool's call asks the user first, beyond what the approvals know by the tool's name:
# never (the built-in tools), always, or only in relayed turns (an allowed MCP server).
Asks = Literal["never", "always", "relayed"]


@attrs.frozen
class ToolSpec:
    """Name, description and JSON schema (``type: object``) as the model sees them."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_ollama(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@attrs.frozen
class ToolContext:
    """Where a tool runs: the canonical workspace, the output cap in characters, and the
    hop count a message sent from this turn carries (0 in a turn of the local user, the
    relayed message's own count + 1 in a relayed turn); ``sandbox``: a command of this
    call runs confined so (None: as the user)."""

    workspace: Path
    output_cap: int = DEFAULT_OUTPUT_CAP
    hops: int = 0
    sandbox: Confinement | None = None


@attrs.frozen
class Tool:
    """A spec and the coroutine that runs it with already-validated arguments; ``asks``
    says whether its calls need the user's yes (an MCP server's tools do)."""

    spec: ToolSpec
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[ToolResult]]
    asks: Asks = "never"
