"""The fake Ollama's script: validation and the exact JSON bodies a real Ollama sends.

Pure (no sockets, no threads): ``tests/fakes/ollama_server.py`` is the HTTP half. The script
format is documented there.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import string
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "DEFAULT_MODEL",
    "ScriptError",
    "chunk_line",
    "done_object",
    "load_object",
    "model_entry",
    "normalize_model",
    "ps_body",
    "show_body",
    "validate_script",
    "warmup_response",
]

DEFAULT_MODEL = "qwen3-coder:latest"
_TOP_KEYS = {"models", "responses", "repeat_last", "context_length", "capabilities", "version"}
_RESPONSE_DEFAULTS: dict[str, Any] = {
    "chunks": [],
    "delay": 0.0,
    "status": 200,
    "error": "fake error",
    "stall_after": None,
    "malformed_after": None,
    "error_line_after": None,
    "no_done": False,
    "done_reason": "stop",
    "close_before_response": False,
    "prompt_eval_count": None,
    "eval_count": None,
}
_CHUNK_KEYS = {"content", "thinking", "tool_calls"}
_CALL_ID_CHARS = string.ascii_lowercase + string.digits


class ScriptError(ValueError):
    """The script is not in the documented format; the message says where and why."""


def _check(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise ScriptError(f"{where}: {message}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _validate_tool_call(call: Any, where: str) -> None:
    _check(isinstance(call, dict), where, "a tool call must be an object")
    unknown = set(call) - {"name", "arguments", "id"}
    _check(not unknown, where, f"unknown tool call keys {sorted(unknown)}")
    _check(isinstance(call.get("name"), str) and bool(call["name"]), where, "needs a 'name'")
    arguments = call.get("arguments", {})
    # A string is allowed on purpose: it plays a model that sends arguments as JSON text.
    _check(isinstance(arguments, dict | str), where, "'arguments' must be an object or string")


def _validate_chunk(chunk: Any, where: str) -> None:
    _check(isinstance(chunk, dict), where, "a chunk must be an object")
    unknown = set(chunk) - _CHUNK_KEYS
    _check(not unknown, where, f"unknown chunk keys {sorted(unknown)}")
    for key in ("content", "thinking"):
        _check(isinstance(chunk.get(key, ""), str), where, f"'{key}' must be a string")
    calls = chunk.get("tool_calls", [])
    _check(isinstance(calls, list), where, "'tool_calls' must be a list")
    for i, call in enumerate(calls):
        _validate_tool_call(call, f"{where}.tool_calls[{i}]")


def _validate_response(raw: Any, where: str) -> dict[str, Any]:
    _check(isinstance(raw, dict), where, "a response must be an object")
    unknown = set(raw) - set(_RESPONSE_DEFAULTS)
    _check(not unknown, where, f"unknown keys {sorted(unknown)}")
    response = {**_RESPONSE_DEFAULTS, **raw}
    chunks = response["chunks"]
    _check(isinstance(chunks, list), where, "'chunks' must be a list")
    for i, chunk in enumerate(chunks):
        _validate_chunk(chunk, f"{where}.chunks[{i}]")
    delay = response["delay"]
    ok = isinstance(delay, int | float) and not isinstance(delay, bool) and delay >= 0
    _check(ok, where, "'delay' must be a number >= 0")
    status = response["status"]
    _check(_is_count(status) and 200 <= status <= 599, where, "'status' must be 200..599")
    _check(isinstance(response["error"], str), where, "'error' must be a string")
    for key in ("stall_after", "malformed_after", "error_line_after"):
        n = response[key]
        ok = n is None or (_is_count(n) and n <= len(chunks))
        _check(ok, where, f"'{key}' must be null or a chunk count 0..{len(chunks)}")
    for key in ("no_done", "close_before_response"):
        _check(isinstance(response[key], bool), where, f"'{key}' must be true or false")
    _check(isinstance(response["done_reason"], str), where, "'done_reason' must be a string")
    for key in ("prompt_eval_count", "eval_count"):
        ok = response[key] is None or _is_count(response[key])
        _check(ok, where, f"'{key}' must be null or a count")
    return response


def validate_script(raw: Any) -> dict[str, Any]:
    """A checked copy of ``raw`` with every default filled in; ``ScriptError`` if invalid."""
    _check(isinstance(raw, dict), "script", "must be a JSON object")
    unknown = set(raw) - _TOP_KEYS
    _check(not unknown, "script", f"unknown keys {sorted(unknown)}")
    models = raw.get("models", [DEFAULT_MODEL])
    ok = isinstance(models, list) and all(isinstance(m, str) and m for m in models)
    _check(ok, "script.models", "must be a list of model names")
    responses = raw.get("responses", [])
    _check(isinstance(responses, list), "script.responses", "must be a list")
    capabilities = raw.get("capabilities", ["completion", "tools", "thinking"])
    ok = isinstance(capabilities, list) and all(isinstance(c, str) for c in capabilities)
    _check(ok, "script.capabilities", "must be a list of strings")
    context_length = raw.get("context_length", 262144)
    _check(_is_count(context_length), "script.context_length", "must be a count")
    repeat_last = raw.get("repeat_last", True)
    _check(isinstance(repeat_last, bool), "script.repeat_last", "must be true or false")
    version = raw.get("version", "0.12.6")
    _check(isinstance(version, str), "script.version", "must be a string")
    return {
        "models": [normalize_model(m) for m in models],
        "responses": [
            _validate_response(r, f"script.responses[{i}]") for i, r in enumerate(responses)
        ],
        "repeat_last": repeat_last,
        "context_length": context_length,
        "capabilities": list(capabilities),
        "version": version,
    }


def normalize_model(name: str) -> str:
    """Ollama's name rule: a name without a tag means ``:latest``."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _now() -> str:
    # Go's RFC3339Nano in UTC ends in "Z"; microseconds are enough for the fake.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _call_id() -> str:
    return "call_" + "".join(secrets.choice(_CALL_ID_CHARS) for _ in range(8))


def _wire_tool_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": call.get("id") or _call_id(),
            "function": {"index": i, "name": call["name"], "arguments": call.get("arguments", {})},
        }
        for i, call in enumerate(calls)
    ]


def chunk_line(model: str, chunk: Mapping[str, Any]) -> bytes:
    """One ``done: false`` NDJSON line for a script chunk."""
    message: dict[str, Any] = {"role": "assistant", "content": chunk.get("content", "")}
    if "thinking" in chunk:
        message["thinking"] = chunk["thinking"]
    if chunk.get("tool_calls"):
        message["tool_calls"] = _wire_tool_calls(chunk["tool_calls"])
    obj = {"model": model, "created_at": _now(), "message": message, "done": False}
    return json.dumps(obj).encode() + b"\n"


def done_object(model: str, response: Mapping[str, Any], prompt_tokens: int) -> dict[str, Any]:
    """The final ``done: true`` object, with Ollama's counters and durations (ns)."""
    eval_count = response["eval_count"]
    if eval_count is None:
        eval_count = len(response["chunks"])
    prompt_eval_count = response["prompt_eval_count"]
    if prompt_eval_count is None:
        prompt_eval_count = prompt_tokens
    return {
        "model": model,
        "created_at": _now(),
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": response["done_reason"],
        "total_duration": 5_000_000 + 20_000_000 * eval_count,
        "load_duration": 1_000_000,
        "prompt_eval_count": prompt_eval_count,
        "prompt_eval_duration": 2_000_000,
        "eval_count": eval_count,
        "eval_duration": 20_000_000 * eval_count,
    }


def load_object(model: str) -> dict[str, Any]:
    """Ollama's answer to a chat with no messages: the model is loaded, nothing generated."""
    return {
        "model": model,
        "created_at": _now(),
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "load",
    }


def warmup_response() -> dict[str, Any]:
    """The reply to a chat with ``num_predict`` 1: one token, cut by that limit."""
    return {**_RESPONSE_DEFAULTS, "chunks": [{"content": "Hello"}], "done_reason": "length"}


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "qwen3",
        "families": ["qwen3"],
        "parameter_size": "30.5B",
        "quantization_level": "Q4_K_M",
    }


def model_entry(name: str) -> dict[str, Any]:
    """One model as ``/api/tags`` lists it."""
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-10-01T12:00:00.000000Z",
        "size": 18_556_688_736,
        "digest": hashlib.sha256(name.encode()).hexdigest(),
        "details": _details(),
    }


def show_body(script: Mapping[str, Any]) -> dict[str, Any]:
    """``/api/show`` for a known model."""
    return {
        "license": "",
        "modelfile": "# fake model\n",
        "parameters": "temperature 0.7",
        "template": "{{ .Prompt }}",
        "details": _details(),
        "model_info": {
            "general.architecture": "qwen3",
            "general.parameter_count": 30_532_122_624,
            "qwen3.context_length": script["context_length"],
        },
        "capabilities": list(script["capabilities"]),
        "modified_at": "2025-10-01T12:00:00.000000Z",
    }


def ps_body(loaded: Sequence[str], context_length: int) -> dict[str, Any]:
    """``/api/ps``: the models used since the fake started, as if still in memory."""
    expires = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    models = []
    for name in loaded:
        entry = model_entry(name)
        del entry["modified_at"]
        entry.update(expires_at=expires, size_vram=entry["size"], context_length=context_length)
        models.append(entry)
    return {"models": models}
