"""The JSON readers both model clients share: a string or count field of a chunk, a tool
call (arguments as an object or a JSON string), and the message of a server's error body,
whatever shape each server gives it. Pure; every malformed value raises ``MalformedStream``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zcoder.conversation import ToolCall
from zcoder.errors import MalformedStream

__all__ = ["count_field", "decode_tool_call", "error_text", "preview", "text_field"]

_PREVIEW = 120


def preview(raw: bytes | str) -> str:
    """The start of a raw value, for an error message (stripped, at most 120 characters)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


def text_field(obj: Mapping[str, Any], key: str, where: str = "chat chunk") -> str:
    """``obj[key]`` as a string (absent or null: ``""``); anything else is malformed."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedStream(f"{where} field {key!r} is not a string: {value!r:.80}")
    return value


def count_field(obj: Mapping[str, Any], key: str, where: str = "chat chunk") -> int:
    """``obj[key]`` as a token count (absent or null: 0); a bool or a negative is malformed."""
    value = obj.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedStream(f"{where} field {key!r} is not a count: {value!r:.80}")
    return value


def _arguments(raw: Any) -> tuple[Mapping[str, Any], str]:
    """The arguments as an object, or ``{}`` and the reason they are unusable.

    Ollama sends an object; some models and proxies send the object as a JSON string. Bad
    arguments are the model's mistake, not the server's: the call is answered with an error
    the model can correct, and the turn goes on.
    """
    if raw is None:
        return {}, ""
    if isinstance(raw, str):
        if not raw.strip():
            return {}, ""
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return {}, f"the arguments are not JSON: {preview(raw)}"
    if not isinstance(raw, dict):
        return {}, f"the arguments are not a JSON object: {raw!r:.80}"
    return raw, ""


def decode_tool_call(obj: Any) -> ToolCall:
    """``{"id"?, "function": {"name", "arguments"}}`` -> ``ToolCall``."""
    function = obj.get("function") if isinstance(obj, dict) else None
    if not isinstance(function, dict):
        raise MalformedStream(f"tool call without a function object: {obj!r:.80}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedStream(f"tool call without a function name: {obj!r:.80}")
    call_id = obj.get("id")
    arguments, problem = _arguments(function.get("arguments"))
    return ToolCall(
        name=name,
        arguments=arguments,
        id=call_id if isinstance(call_id, str) else "",
        problem=problem,
    )


def error_text(body: bytes) -> str:
    """The message of a JSON error body, else the body text itself (shortened).

    Servers differ: Ollama sends ``{"error": "..."}``; llama.cpp, LM Studio and OpenAI
    ``{"error": {"message": "..."}}``; vLLM ``{"message": "..."}``. The text is shown, never
    the object.
    """
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        obj = None
    if isinstance(obj, dict):
        inner = obj.get("error")
        if isinstance(inner, dict):
            inner = inner.get("message") or inner.get("error")
        text = inner or obj.get("message") or obj.get("detail")
        if isinstance(text, str) and text.strip():
            return text.strip()
    return preview(body) or "(empty answer)"
