"""The fakes' context window: a tokenizer of their own, each server's context error body
exactly as it sends it, and Ollama's silent truncation (pure, no sockets).

The tokenizer is deliberately not zcoder's estimate (four characters a token plus four a
message): 3.3 characters a token plus three a message, counted over every message's
content, thinking, tool-call names and arguments, and the tool schemas. zcoder's prompt
sizes are right only where it calibrates against the count the fake reports.

Error bodies (HTTP 400; N is the prompt's count, W the window, M the request's
``max_tokens``, T = N + M):

- llama.cpp (checked against a real ``llama-server``; refused when N >= W)::

    {"error":{"code":400,"message":"request (N tokens) exceeds the available context size
    (W tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":N,
    "n_ctx":W}}

- vLLM (refused when N + M > W)::

    {"object":"error","message":"This model's maximum context length is W tokens. However,
    you requested T tokens (N in the messages, M in the completion). Please reduce the length
    of the messages or completion.","type":"BadRequestError","param":null,"code":400}

- LM Studio (refused when N > W)::

    {"error":"Trying to keep the first N tokens when context the overflows. However, the
    model is loaded with context length of only W tokens, which is not enough. Try to load
    the model with a larger context length, or provide a shorter input"}

- Ollama's ``/v1`` (its OpenAI error shape; refused when N > W; it names no size)::

    {"error":{"message":"the input length exceeds the context length",
    "type":"invalid_request_error","param":null,"code":null}}

Ollama's own ``/api/chat`` never refuses: it keeps the last ``num_ctx`` tokens of the
prompt (``OLLAMA_NUM_CTX`` when the request sets none) and counts only those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

__all__ = [
    "FLAVOURS",
    "OLLAMA_NUM_CTX",
    "Flavour",
    "Tokenizer",
    "overflow_body",
]

Flavour = Literal["llama.cpp", "vLLM", "LM Studio", "Ollama"]
# ``owned_by`` of /v1/models as each server fills it in -> the server it plays.
FLAVOURS: dict[str, Flavour] = {
    "llamacpp": "llama.cpp",
    "vllm": "vLLM",
    "organization_owner": "LM Studio",
    "library": "Ollama",
    "ollama": "Ollama",
}
# Ollama's num_ctx when a request sets none.
OLLAMA_NUM_CTX = 2048


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return json.dumps(value)


@attrs.frozen
class Tokenizer:
    """The fake's token count of a request: characters over ``chars_per_token``, rounded
    up, plus ``per_message`` for each message's template."""

    chars_per_token: float = 3.3
    per_message: int = 3

    def chars(self, message: Mapping[str, Any]) -> int:
        size = len(_text(message.get("content")))
        size += len(_text(message.get("thinking") or message.get("reasoning_content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                size += len(str(function.get("name", ""))) + len(_text(function.get("arguments")))
        return size

    def count(self, messages: Sequence[Any], tools: Any = None) -> int:
        """The prompt's tokens: its messages and its tool schemas."""
        chars = sum(self.chars(m) for m in messages if isinstance(m, dict))
        chars += len(json.dumps(tools)) if tools else 0
        # Rounded first: 33 / 3.3 is 10.000000000000002 in floating point, and 10 tokens.
        tokens = math.ceil(round(chars / self.chars_per_token, 6))
        return tokens + self.per_message * len(messages)


def overflow_body(flavour: Flavour, prompt: int, max_tokens: int | None, window: int) -> bytes:
    """The server's HTTP 400 body for a request it refuses, or ``b""`` when it fits."""
    if flavour == "llama.cpp":
        if prompt < window:
            return b""
        message = (
            f"request ({prompt} tokens) exceeds the available context size ({window} tokens), "
            "try increasing it"
        )
        error = {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }
        return _compact({"error": error})
    if flavour == "vLLM":
        completion = max_tokens or 0
        if prompt + completion <= window:
            return b""
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
        return _compact(
            {
                "object": "error",
                "message": message,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        )
    if prompt <= window:
        return b""
    if flavour == "LM Studio":
        message = (
            f"Trying to keep the first {prompt} tokens when context the overflows. However, "
            f"the model is loaded with context length of only {window} tokens, which is not "
            "enough. Try to load the model with a larger context length, or provide a shorter "
            "input"
        )
        return _compact({"error": message})
    error = {
        "message": "the input length exceeds the context length",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    return _compact({"error": error})
