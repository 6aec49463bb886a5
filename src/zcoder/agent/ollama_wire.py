"""Ollama's JSON shapes, with no I/O: request bodies out, chat chunks and model lists in.

The pure half of the Ollama client (``agent/ollama.py`` is the HTTP half). Every shape
follows ``spec/ollama-api.md``; anything else raises ``MalformedStream`` or
``StreamErrorLine`` so that the turn loop only ever sees ``ChatChunk`` values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from zcoder.agent.json_fields import count_field, decode_tool_call, preview, text_field
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.conversation import Message, ToolCall
from zcoder.errors import MalformedStream, StreamErrorLine

__all__ = [
    "MAX_LINE_BYTES",
    "LineSplitter",
    "ShowInfo",
    "decode_chat_line",
    "decode_models",
    "decode_show",
    "encode_chat_request",
    "encode_message",
]

# A chat line is one token or one set of tool calls; 16 MiB without a newline is not a line.
MAX_LINE_BYTES = 16 * 1024 * 1024


def encode_message(message: Message) -> dict[str, Any]:
    """One history entry in Ollama's chat shape (empty optional fields left out)."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.thinking:
        out["thinking"] = message.thinking
    if message.tool_calls:
        out["tool_calls"] = [
            {"function": {"name": call.name, "arguments": dict(call.arguments)}}
            for call in message.tool_calls
        ]
    if message.tool_name:
        out["tool_name"] = message.tool_name
    return out


def encode_chat_request(request: ChatRequest) -> dict[str, Any]:
    """The ``POST /api/chat`` body; ``stream`` is explicit: the server default may change."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [encode_message(m) for m in request.messages],
        "tools": [dict(tool) for tool in request.tools],
        "stream": True,
        "think": request.think,
    }
    options: dict[str, int | float] = {}
    if request.num_ctx is not None:
        options["num_ctx"] = request.num_ctx
    if request.num_predict is not None:
        options["num_predict"] = request.num_predict
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if options:
        body["options"] = options
    return body


def _tool_calls(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    raw = message.get("tool_calls")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise MalformedStream(f"chat chunk field 'tool_calls' is not a list: {raw!r:.80}")
    return tuple(decode_tool_call(item) for item in raw)


def decode_chat_line(line: bytes) -> ChatChunk:
    """Parse one NDJSON line of a chat stream.

    Raises ``StreamErrorLine`` for an ``{"error": ...}`` line and ``MalformedStream`` for
    anything that is not a chat chunk.
    """
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise MalformedStream(
            f"the model server sent a line that is not JSON: {preview(line)}"
        ) from None
    if not isinstance(obj, dict):
        raise MalformedStream(
            f"the model server sent a line that is not an object: {preview(line)}"
        )
    if "error" in obj:
        raise StreamErrorLine(f"the model server failed mid-reply: {obj['error']}")
    done = obj.get("done")
    if not isinstance(done, bool):
        raise MalformedStream(f"chat chunk without a boolean 'done': {preview(line)}")
    message = obj.get("message") or {}
    if not isinstance(message, dict):
        raise MalformedStream(f"chat chunk 'message' is not an object: {preview(line)}")
    return ChatChunk(
        content=text_field(message, "content"),
        thinking=text_field(message, "thinking"),
        tool_calls=_tool_calls(message),
        done=done,
        done_reason=text_field(obj, "done_reason"),
        prompt_eval_count=count_field(obj, "prompt_eval_count"),
        eval_count=count_field(obj, "eval_count"),
        eval_duration_ns=count_field(obj, "eval_duration"),
    )


def decode_models(body: Any) -> list[ModelInfo]:
    """The ``GET /api/tags`` body -> installed models, in the server's order."""
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        raise MalformedStream(f"/api/tags answer has no 'models' list: {body!r:.80}")
    out: list[ModelInfo] = []
    for entry in models:
        if not isinstance(entry, dict):
            raise MalformedStream(f"/api/tags entry is not an object: {entry!r:.80}")
        name = entry.get("name") or entry.get("model")
        if not isinstance(name, str) or not name:
            raise MalformedStream(f"/api/tags entry without a name: {entry!r:.80}")
        details = entry.get("details")
        if not isinstance(details, dict):
            details = {}
        size = entry.get("size")
        out.append(
            ModelInfo(
                name=name,
                size=size if isinstance(size, int) and not isinstance(size, bool) else 0,
                parameter_size=str(details.get("parameter_size") or ""),
                quantization_level=str(details.get("quantization_level") or ""),
            )
        )
    return out


@attrs.frozen
class ShowInfo:
    """What ``POST /api/show`` tells about one model that zcoder uses."""

    name: str
    context_length: int | None = None
    capabilities: frozenset[str] = frozenset()
    family: str = ""
    parameter_size: str = ""


def _context_length(model_info: Mapping[str, Any]) -> int | None:
    arch = model_info.get("general.architecture")
    keys = [f"{arch}.context_length"] if isinstance(arch, str) else []
    keys += [k for k in model_info if k.endswith(".context_length")]
    for key in keys:
        value = model_info.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def decode_show(body: Any, name: str) -> ShowInfo:
    """The ``POST /api/show`` body -> context length and capabilities (missing ones empty)."""
    if not isinstance(body, dict):
        raise MalformedStream(f"/api/show answer is not an object: {body!r:.80}")
    model_info = body.get("model_info")
    details = body.get("details")
    capabilities = body.get("capabilities")
    details = details if isinstance(details, dict) else {}
    return ShowInfo(
        name=name,
        context_length=_context_length(model_info) if isinstance(model_info, dict) else None,
        capabilities=frozenset(
            c
            for c in (capabilities if isinstance(capabilities, list) else [])
            if isinstance(c, str)
        ),
        family=str(details.get("family") or ""),
        parameter_size=str(details.get("parameter_size") or ""),
    )


class LineSplitter:
    """Cut a byte stream into NDJSON lines, however the network splits it."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the complete lines (without the newline) now available."""
        self._buffer += data
        if b"\n" not in data:
            if len(self._buffer) > MAX_LINE_BYTES:
                raise MalformedStream(f"the model server sent a line over {MAX_LINE_BYTES} bytes")
            return []
        *lines, rest = self._buffer.split(b"\n")
        if len(rest) > MAX_LINE_BYTES:
            raise MalformedStream(f"the model server sent a line over {MAX_LINE_BYTES} bytes")
        self._buffer = bytearray(rest)
        return [bytes(line) for line in lines]

    def tail(self) -> bytes:
        """At end of stream: the last line if it had no trailing newline, else ``b""``."""
        rest, self._buffer = bytes(self._buffer), bytearray()
        return rest
