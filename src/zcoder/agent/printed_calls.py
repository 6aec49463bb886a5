"""Tool calls a small model printed as text instead of calling them.

``text_tool_call`` reads a whole reply that is only a call (the loop then runs it);
``may_be_printed_call`` tells from the start of a streamed reply that it might become one
(the one-shot output holds such text back until the reply is complete).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from zcoder.conversation import ToolCall

__all__ = ["may_be_printed_call", "text_tool_call"]

_FENCE = re.compile(r"^(?:```(?:json)?|<tool_call>)\s*(.*?)\s*(?:```|</tool_call>)$", re.S)


def text_tool_call(content: str, names: Collection[str]) -> ToolCall | None:
    """A tool call that a small model printed as text instead of calling it: a whole reply
    that is ``{"name": KNOWN_TOOL, "arguments": {...}}`` (bare, in a json fence, or in
    ``<tool_call>`` tags). Anything else is an ordinary answer."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) - {"name", "arguments", "parameters"}:
        return None
    name, args = data.get("name"), data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if name not in names or not isinstance(args, dict):
        return None
    return ToolCall(str(name), args)


# How a printed call starts, compared with whitespace removed (see ``_FENCE``).
_CALL_STARTS = ('{"name"', '{"arguments"', '{"parameters"', "```json{", "```{", "<tool_call>")


def may_be_printed_call(text: str) -> bool:
    """True while the start of a reply is still consistent with a printed tool call."""
    start = "".join(text.split())[:16]
    return any(start.startswith(m) or m.startswith(start) for m in _CALL_STARTS)
