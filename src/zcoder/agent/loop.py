"""One agent turn: model steps, tool rounds and guards, for both origins (user and relay).

Per step: build the request (one fresh system message, then the session history), stream
the reply, append the assistant message, run its tool calls in order (``rounds.py``), append
their results, and repeat until a final answer or ``finish``. The history is kept valid at
every await: partial text never enters it, and every tool call in it is answered before the
next request, by ``interrupt`` if the turn is cancelled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from zcoder.agent.loop_guard import EMPTY_REPLY_NUDGE, REPEAT_WARNING, TurnGuard
from zcoder.agent.model import ChatChunk, ChatRequest
from zcoder.agent.printed_calls import text_tool_call
from zcoder.agent.prompts import build_system_prompt
from zcoder.agent.rounds import RoundRunner, TurnParts, describe_model_error
from zcoder.agent.turns import OutcomeStatus, TurnOutcome, TurnRequest, relay_record
from zcoder.conversation import Message, ToolCall
from zcoder.errors import ModelError, ModelHTTPError
from zcoder.live import StateChange, TextDelta, ThinkingDelta

__all__ = [
    "DEFAULT_NUM_CTX",
    "STOP_MARKER",
    "Turn",
    "context_size",
    "estimate_tokens",
    "text_tool_call",
]

_log = logging.getLogger(__name__)

STOP_MARKER = "[Response generation stopped by user.]"
# Ollama's own default context is 2-4k tokens and it silently drops the start of a longer
# prompt; our system prompt and tools alone take much of that. Ollama clamps a larger value
# to what the model supports.
DEFAULT_NUM_CTX = 16384
_CHARS_PER_TOKEN = 4


def context_size(configured: int | None) -> int:
    return configured or DEFAULT_NUM_CTX


def estimate_tokens(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> int:
    """A rough prompt size (about four characters a token), enough to warn in time."""
    chars = sum(len(m.content) + len(m.thinking) for m in messages)
    chars += sum(
        len(json.dumps(dict(c.arguments), default=str)) + len(c.name)
        for m in messages
        for c in m.tool_calls
    )
    chars += len(json.dumps(list(tools)))
    return chars // _CHARS_PER_TOKEN


@attrs.define
class _Reply:
    content: str = ""
    thinking: str = ""
    calls: list[ToolCall] = attrs.Factory(list)
    done_reason: str = ""


class Turn:
    """One running turn. ``run`` drives it; ``interrupt`` repairs history after a cancel."""

    def __init__(self, parts: TurnParts, request: TurnRequest, instructions: str) -> None:
        self._p = parts
        self._request = request
        self._instructions = instructions
        self._guard = TurnGuard()
        self._reply: _Reply | None = None
        self._context_warned = False
        self.rounds = RoundRunner(parts, request.origin, request.sender)

    def begin(self) -> None:
        """Put the request into the transcript and the history (before the first save)."""
        session, req = self._p.session, self._request
        if req.origin == "relay" and req.sender is not None:
            s = req.sender
            meta = {
                "project": s.project,
                "pid": str(s.pid),
                "workspace": s.workspace,
                "instance_id": s.instance_id,
                "verified": "yes" if s.verified else "no",
            }
            self._p.entry("relay", req.text, meta)
            session.history.append(Message(role="user", content=relay_record(s, req.text)))
        else:
            session.record_user_prompt(req.text)
            self._p.entry("user", req.text)
            session.history.append(Message(role="user", content=req.text))

    async def run(self) -> TurnOutcome:
        while True:
            if not self._guard.take_step():
                return self._fail("step_limit", "Stopped: the turn reached its step limit.")
            try:
                reply = await self._stream()
            except ModelError as exc:
                _log.debug("model request failed: %r", exc)
                message = describe_model_error(exc, self._p.config.host, self._p.model())
                return self._fail("error", message)
            outcome = await self._handle(reply)
            if outcome is not None:
                return outcome

    async def _handle(self, reply: _Reply) -> TurnOutcome | None:
        history = self._p.session.history
        if not reply.calls and reply.content:
            names = [s["function"]["name"] for s in self.rounds.tool_specs()]
            printed = text_tool_call(reply.content, names)
            if printed is not None:
                reply.calls, reply.content = [printed], ""
        if not reply.calls and not reply.content.strip():
            if self._guard.take_nudge():
                history.append(Message(role="user", content=EMPTY_REPLY_NUDGE))
                return None
            return self._fail("error", "The model gave only empty replies; stopped.")
        history.append(
            Message(role="assistant", content=reply.content, tool_calls=tuple(reply.calls))
        )
        if reply.content.strip():
            self._p.entry("assistant", reply.content.strip())
        if reply.done_reason == "length":
            self._p.entry("system", "The reply was cut off: the model hit its output limit.")
        if not reply.calls:
            self._p.sink.emit(StateChange("ready"))
            return TurnOutcome("answered", text=reply.content.strip())
        verdict = self._guard.check_round(reply.calls)
        if verdict == "stop":
            self.rounds.refuse(reply.calls, "the turn was stopped: the same tool calls repeated")
            return self._fail("loop_stopped", "Stopped: the model kept repeating the same tools.")
        if verdict == "warn":
            self.rounds.refuse(reply.calls, REPEAT_WARNING)
            self._p.entry("system", "The model repeated its last tool calls; it was warned.")
            return None
        return await self.rounds.run(reply.calls, self._guard.steps)

    def _fail(self, status: OutcomeStatus, message: str) -> TurnOutcome:
        self._p.entry("error", message)
        self._p.sink.emit(StateChange("error", message))
        return TurnOutcome(status, error=message)

    def _chat_request(self) -> ChatRequest:
        specs = self.rounds.tool_specs()
        sender = self._request.sender
        prompt = build_system_prompt(
            profile=self._p.config.profile,
            workspace=self._p.config.workspace,
            tool_names=[s["function"]["name"] for s in specs],
            instructions=self._instructions,
            relay_sender=sender.instance_id if sender is not None else "",
        )
        messages = [Message(role="system", content=prompt), *self._p.session.history]
        num_ctx = context_size(self._p.config.context_window)
        self._check_context(estimate_tokens(messages, specs), num_ctx)
        return ChatRequest(
            model=self._p.model(),
            messages=messages,
            tools=specs,
            think=self._p.think,
            num_ctx=num_ctx,
        )

    def _check_context(self, tokens: int, num_ctx: int) -> None:
        if tokens < num_ctx * 0.9 or self._context_warned:
            return
        self._context_warned = True
        self._p.entry(
            "system",
            f"The conversation (about {tokens} tokens) nearly fills the context window "
            f"({num_ctx} tokens): the model may lose its beginning. Start a new session, "
            "or raise --context-window.",
        )

    async def _stream(self) -> _Reply:
        try:
            return await self._stream_once()
        except ModelHTTPError as exc:
            # Models without thinking refuse think=true; ask once more without it.
            if not (self._p.think and "does not support thinking" in exc.server_message):
                raise
            self._p.think = False
            return await self._stream_once()

    async def _stream_once(self) -> _Reply:
        reply = self._reply = _Reply()
        self._p.sink.emit(StateChange("thinking"))
        async with self._p.client.stream_chat(self._chat_request()) as chunks:
            async for chunk in chunks:
                self._take(reply, chunk)
        self._reply = None
        _log.debug(
            "model reply: %d chars, %d tool calls, done_reason %r",
            len(reply.content),
            len(reply.calls),
            reply.done_reason,
        )
        return reply

    def _take(self, reply: _Reply, chunk: ChatChunk) -> None:
        sink = self._p.sink
        if chunk.thinking:
            reply.thinking += chunk.thinking
            sink.emit(ThinkingDelta(chunk.thinking))
        if chunk.content:
            if not reply.content:
                sink.emit(StateChange("streaming"))
            reply.content += chunk.content
            sink.emit(TextDelta(chunk.content))
        reply.calls.extend(chunk.tool_calls)
        if chunk.done:
            reply.done_reason = chunk.done_reason

    def interrupt(self) -> TurnOutcome:
        """After a cancel: show what streamed, answer unrun calls, add the stop marker."""
        if self._reply is not None and self._reply.content.strip():
            self._p.entry("assistant", self._reply.content.strip(), {"partial": "yes"})
        self._reply = None
        self.rounds.cancel_pending()
        self._p.session.history.append(Message(role="assistant", content=STOP_MARKER))
        self._p.entry("system", "Response generation stopped by user.")
        self._p.sink.emit(StateChange("stopped"))
        return TurnOutcome("cancelled")
