"""Tool calls a small model printed as text instead of calling them (pure, no I/O).

``printed_tool_calls`` reads a whole reply and finds the calls in it, in these forms:

- the whole reply is ``{"name": TOOL, "arguments": {...}}`` (bare or in a json fence);
- one or more ``<tool_call>...</tool_call>`` blocks, each holding that JSON object or the
  XML form below, with any text around them (the tags cannot be mistaken for prose);
- the XML form qwen3-coder prints, alone or several, with text around:
  ``<function=NAME><parameter=KEY>value</parameter>...</function>``. Its values are text:
  each is turned into the type the tool's schema gives the parameter (integer, number,
  boolean, array, object) when it reads as one, else left as text for the tool to refuse.

Every call found must name a tool on offer, otherwise none is taken: the reply is then an
ordinary answer. A bare JSON object must be the whole reply, since inside prose it may be
an example. ``may_be_printed_call`` tells from the start of a streamed reply that it might
become a call (the one-shot output holds such text back until the reply is complete).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from zcoder.conversation import ToolCall

__all__ = ["PrintedCalls", "may_be_printed_call", "printed_tool_calls"]

Schemas = Mapping[str, Mapping[str, Any]]  # tool name -> its parameters' JSON schema

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.S)
_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


@attrs.frozen
class PrintedCalls:
    """The calls found in a reply, and the reply's text around them."""

    calls: tuple[ToolCall, ...]
    text: str = ""


def printed_tool_calls(content: str, schemas: Schemas) -> PrintedCalls | None:
    """The tool calls printed in ``content``, or None when it is an ordinary answer."""
    text = content.strip()
    whole = _json_call(_unfenced(text), schemas)
    if whole is not None:
        return PrintedCalls((whole,))
    if "<tool_call>" in text:
        pattern, parse = _TAGGED, _tagged_call
    elif "<function=" in text:
        pattern, parse = _FUNCTION, _xml_match_call
    else:
        return None
    calls: list[ToolCall] = []
    for match in pattern.finditer(text):
        call = parse(match, schemas)
        if call is None:
            return None
        calls.append(call)
    if not calls:
        return None
    rest = pattern.sub("\n", text)
    return PrintedCalls(tuple(calls), re.sub(r"\n{3,}", "\n\n", rest).strip())


def _unfenced(text: str) -> str:
    fenced = _FENCE.match(text)
    return fenced.group(1) if fenced else text


def _tagged_call(match: re.Match[str], schemas: Schemas) -> ToolCall | None:
    body = _unfenced(match.group(1))
    if body.startswith("{"):
        return _json_call(body, schemas)
    inner = _FUNCTION.fullmatch(body)
    return _xml_match_call(inner, schemas) if inner else None


def _json_call(text: str, schemas: Schemas) -> ToolCall | None:
    """``{"name": KNOWN_TOOL, "arguments"|"parameters": {...}}`` and nothing else."""
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
    if not isinstance(name, str) or name not in schemas or not isinstance(args, dict):
        return None
    return ToolCall(name, args)


def _xml_match_call(match: re.Match[str], schemas: Schemas) -> ToolCall | None:
    name, body = match.group(1), match.group(2)
    if name not in schemas:
        return None
    properties = schemas[name].get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    arguments: dict[str, Any] = {}
    for param in _PARAMETER.finditer(body):
        key, raw = param.group(1), _trim_newline(param.group(2))
        spec = properties.get(key)
        arguments[key] = _coerce(raw, spec if isinstance(spec, Mapping) else {})
    return ToolCall(name, arguments)


def _trim_newline(value: str) -> str:
    # The form puts each value on lines of its own: one newline on each side is layout.
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def _schema_type(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return kind if isinstance(kind, str) else "string"


def _coerce(raw: str, spec: Mapping[str, Any]) -> Any:
    """``raw`` as the schema's type when it reads as one; otherwise the text itself."""
    kind, value = _schema_type(spec), raw.strip()
    if kind == "integer" and _INTEGER.fullmatch(value):
        return int(value)
    if kind == "number" and _NUMBER.fullmatch(value):
        number = float(value)
        return int(number) if _INTEGER.fullmatch(value) else number
    if kind == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind in ("array", "object"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return raw
        if isinstance(parsed, list if kind == "array" else dict):
            return parsed
    return raw


# How a printed call starts, compared with whitespace removed.
_CALL_STARTS = (
    '{"name"',
    '{"arguments"',
    '{"parameters"',
    "```json{",
    "```{",
    "<tool_call>",
    "<function=",
)


def may_be_printed_call(text: str) -> bool:
    """True while the start of a reply is still consistent with a printed tool call."""
    start = "".join(text.split())[:16]
    return any(start.startswith(m) or m.startswith(start) for m in _CALL_STARTS)
