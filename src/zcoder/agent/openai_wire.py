"""The OpenAI-compatible chat API's shapes, with no I/O: request bodies out; the data of
server-sent events (``agent/openai_sse.py``) in, assembled into ``ChatChunk`` values.

The pure half of the OpenAI client (``agent/openai.py`` is the HTTP half). The server
streams ``chat.completion.chunk`` objects as SSE ``data:`` events and ends with
``data: [DONE]``. Content and reasoning arrive as deltas and are passed on as they come;
tool calls arrive in pieces keyed by ``index`` (the id and name first, then the arguments
as JSON text cut anywhere) and are handed on whole once the reply says it is finished.
Anything that is not such a chunk raises ``MalformedStream`` or ``StreamErrorLine``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from zcoder.agent.json_fields import count_field, decode_tool_call, error_text, text_field
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.conversation import Message
from zcoder.errors import MalformedStream, StreamErrorLine

__all__ = [
    "ReplyAssembler",
    "decode_models",
    "encode_chat_request",
    "encode_messages",
    "model_entries",
]

_PREVIEW = 120
_DONE = "[DONE]"


def _preview(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


def encode_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The history in the OpenAI shape.

    zcoder's history pairs a tool result with its call by position (Ollama's way), while
    this API pairs them by ``tool_call_id``: each result takes the id of the next
    unanswered call of the assistant message before it; a call without an id gets one
    made from its position, stable across requests so a server's prompt cache still hits.
    """
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for n, message in enumerate(messages):
        if message.role == "assistant":
            ids = [call.id or f"call_{n}_{i}" for i, call in enumerate(message.tool_calls)]
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call_id, call in zip(ids, message.tool_calls, strict=True)
                ]
            pending = ids
            out.append(entry)
        elif message.role == "tool":
            call_id = pending.pop(0) if pending else f"call_{n}"
            out.append({"role": "tool", "tool_call_id": call_id, "content": message.content})
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def encode_chat_request(request: ChatRequest) -> dict[str, Any]:
    """The ``POST /v1/chat/completions`` body.

    ``num_ctx`` is not sent: the context size is the server's own setting. ``think`` is not
    sent either: the API has no portable switch for it (reasoning that arrives is shown).
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": encode_messages(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [dict(tool) for tool in request.tools]
    if request.num_predict is not None:
        body["max_tokens"] = request.num_predict
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


@attrs.define
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.Factory(list)


def _error_of(text: str) -> str:
    return error_text(text.encode())


def _text(obj: Mapping[str, Any], key: str) -> str:
    return text_field(obj, key, "chunk")


def _count(obj: Mapping[str, Any], key: str) -> int:
    return count_field(obj, key, "usage")


class ReplyAssembler:
    """The ``ChatChunk`` values of one streamed reply, from its SSE ``data`` texts.

    Content and reasoning (``reasoning_content``, or ``reasoning`` as vLLM and LM Studio
    name it) become chunks at once; tool calls are kept until ``finish_reason`` (or
    ``[DONE]``) and then passed on whole; the ``done`` chunk comes at ``[DONE]`` with the
    finish reason and the usage counts (``stream_options.include_usage``).
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}
        self._finish = ""
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self.done = False

    def data(self, text: str) -> list[ChatChunk]:
        """One event's data -> the chunks it yields (none, some, or the final ones)."""
        if self.done:
            return []  # a server that sends more after [DONE]: nothing of it is used
        if text.strip() == _DONE:
            return self.finish()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            raise MalformedStream(
                f"the model server sent an event that is not JSON: {_preview(text)}"
            ) from None
        if not isinstance(obj, dict):
            raise MalformedStream(f"the model server sent an event that is not an object: {text}")
        if "error" in obj:
            raise StreamErrorLine(f"the model server failed mid-reply: {_error_of(text)}")
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._prompt_tokens = _count(usage, "prompt_tokens") or self._prompt_tokens
            self._completion_tokens = _count(usage, "completion_tokens") or self._completion_tokens
        choices = obj.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise MalformedStream(f"chunk field 'choices' is not a list: {_preview(text)}")
        out: list[ChatChunk] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise MalformedStream(f"a chunk choice is not an object: {_preview(text)}")
            if choice.get("index", 0) == 0:  # zcoder asks for one choice
                out.extend(self._choice(choice))
        return out

    def _choice(self, choice: Mapping[str, Any]) -> list[ChatChunk]:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise MalformedStream(f"a chunk delta is not an object: {delta!r:.80}")
        out: list[ChatChunk] = []
        content = _text(delta, "content")
        thinking = _text(delta, "reasoning_content") or _text(delta, "reasoning")
        if content or thinking:
            out.append(ChatChunk(content=content, thinking=thinking))
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise MalformedStream(f"chunk field 'tool_calls' is not a list: {calls!r:.80}")
            for piece in calls:
                self._call_piece(piece)
        finish = choice.get("finish_reason")
        if finish is not None:
            if not isinstance(finish, str):
                raise MalformedStream(f"'finish_reason' is not a string: {finish!r:.80}")
            self._finish = finish
            out.extend(self._whole_calls())
        return out

    def _call_piece(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            raise MalformedStream(f"a tool call delta is not an object: {piece!r:.80}")
        index = piece.get("index", len(self._calls))
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise MalformedStream(f"a tool call delta has no valid index: {piece!r:.80}")
        function = piece.get("function") or {}
        if not isinstance(function, dict):
            raise MalformedStream(f"a tool call delta has no function object: {piece!r:.80}")
        call = self._calls.setdefault(index, _PartialCall())
        call.id = call.id or _text(piece, "id")
        # The name comes whole in the first piece; a server that repeats it must not double it.
        name = _text(function, "name")
        if name and not call.name:
            call.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a server that sends the object itself
            arguments = json.dumps(arguments)
        if arguments is not None and not isinstance(arguments, str):
            raise MalformedStream(f"tool call arguments are not text: {arguments!r:.80}")
        if arguments:
            call.arguments.append(arguments)

    def _whole_calls(self) -> list[ChatChunk]:
        """The assembled calls, in index order; arguments that are not a JSON object become
        the call's ``problem`` (the model's mistake, answered with an error)."""
        if not self._calls:
            return []
        calls = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            if not partial.name:
                raise MalformedStream(f"tool call {index} arrived without a function name")
            raw = {"name": partial.name, "arguments": "".join(partial.arguments)}
            calls.append(decode_tool_call({"id": partial.id, "function": raw}))
        self._calls.clear()
        return [ChatChunk(tool_calls=tuple(calls))]

    def finish(self) -> list[ChatChunk]:
        """At ``[DONE]`` (or the end of a body after a finish reason): the final chunks."""
        if self.done:
            return []
        self.done = True
        return [
            *self._whole_calls(),
            ChatChunk(
                done=True,
                done_reason=self._finish or "stop",
                prompt_eval_count=self._prompt_tokens,
                eval_count=self._completion_tokens,
            ),
        ]

    @property
    def finished(self) -> bool:
        """A finish reason arrived: the reply is complete even if ``[DONE]`` never comes."""
        return bool(self._finish)


def model_entries(body: Any) -> list[dict[str, Any]]:
    """The ``data`` list of a ``GET /v1/models`` answer (each entry an object with an id)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise MalformedStream(f"/v1/models answer has no 'data' list: {body!r:.80}")
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            raise MalformedStream(f"/v1/models entry without an id: {entry!r:.80}")
        out.append(entry)
    return out


def decode_models(body: Any) -> list[ModelInfo]:
    """The ``GET /v1/models`` body -> the served models, in the server's order."""
    return [ModelInfo(name=entry["id"]) for entry in model_entries(body)]
