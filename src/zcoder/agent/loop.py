"""One agent turn: model steps, tool rounds and guards, for both origins (user and relay).

Per step: build the request (one fresh system message, then the session history), stream
the reply, append the assistant message, run its tool calls in order (``rounds.py``), append
their results, and repeat until a final answer or ``finish``. The history is kept valid at
every await: partial text never enters it, and every tool call in it is answered before the
next request, by ``interrupt`` if the turn is cancelled.

It stays one module past 400 lines because ``Turn`` is one state machine: fitting a step to
the window (count, compact, refuse), streaming it and stopping it read and write the same
per-turn state (the probe, the pending compaction, the counts before a refusal). The pure
parts already live apart: sizes in ``context.py``, the plan in ``compaction.py``, the
tool rounds in ``rounds.py``, what a request sends in ``steps.py`` and ``stop_note.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs

from zcoder.agent.compaction import Plan, Sizes, plan_compaction
from zcoder.agent.compactor import run_plan
from zcoder.agent.context import (
    DEFAULT_NUM_CTX,
    Calibration,
    Overflow,
    estimate_tokens,
    fixed_too_large,
    overflow_in,
    refused_text,
    server_text,
    too_large_text,
)
from zcoder.agent.loop_guard import EMPTY_REPLY_NUDGE, REPEAT_WARNING, TurnGuard
from zcoder.agent.model import ChatChunk, ChatRequest
from zcoder.agent.parts import TurnParts
from zcoder.agent.printed_calls import printed_tool_calls
from zcoder.agent.rounds import RoundRunner, describe_model_error
from zcoder.agent.runaway import RunawayDetector
from zcoder.agent.steps import Steps
from zcoder.agent.turns import STOP_MARKER, OutcomeStatus, TurnOutcome, TurnRequest, relay_record
from zcoder.conversation import Message, ToolCall
from zcoder.errors import ModelError, ModelHTTPError, ServerUnavailable
from zcoder.live import StateChange, TextDelta, ThinkingDelta
from zcoder.text.counts import counted

__all__ = ["DEFAULT_NUM_CTX", "STOP_MARKER", "Turn", "estimate_tokens"]

_log = logging.getLogger(__name__)


class _TooLarge(Exception):
    """The next request cannot fit the window, however the history is compacted."""


@attrs.define
class _Reply:
    content: str = ""
    thinking: str = ""
    calls: list[ToolCall] = attrs.Factory(list)
    done_reason: str = ""
    prompt_tokens: int = 0
    runaway: str = ""  # "reply" or "thinking": the stream was stopped repeating itself
    printed: int = 0  # calls taken from the reply's text
    cap: int = 0  # the output cap its request asked for


class Turn:
    """One running turn. ``run`` drives it; ``interrupt`` repairs history after a cancel.

    ``think`` starts as given and goes off for the rest of the turn when the model refuses
    thinking; the agent reads it afterwards to remember that per model. ``steps`` builds
    and measures its requests, in the window given to ``run`` or ``warm``.
    """

    def __init__(
        self, parts: TurnParts, request: TurnRequest, instructions: str, *, think: bool = True
    ) -> None:
        self._p = parts
        self._request = request
        self.think = think
        self._guard = TurnGuard()
        self._reply: _Reply | None = None
        self._said = ""  # the last text the model said in this turn (a stop keeps it)
        self._overflowed = False
        self._compact_next = False  # after a context error: the step goes again compacted
        # What the server had counted before it refused a request of this turn as too large
        self._before_refusal: Calibration | None = None
        self._probed = False
        # A compaction was run and its result dropped, not being smaller (``/compact`` says
        # so instead of "nothing to compact").
        self.compaction_skipped = False
        # The server refused the turn as too large for its window: final, not "model down".
        self.refused = False
        self.rounds = RoundRunner(parts, request.origin, request.sender)
        self.steps = Steps(parts, request, instructions, self.rounds)

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
            except _TooLarge as exc:
                self.refused = True
                return self._fail("error", str(exc))
            except ModelError as exc:
                _log.debug("model request failed: %r", exc)
                overflow = overflow_in(exc)
                if overflow is not None:
                    if not self._overflowed:
                        # Send the step again, once: compacted, unless the server's count
                        # shows the prompt fits and only the reply's cap did not.
                        self._overflowed = True
                        self._compact_next = not self._learn_overflow(overflow)
                        self._guard.steps -= 1
                        continue
                    self.refused = True
                    kind = self._p.client.kind.name
                    text = refused_text(self.steps.window, kind, server_text(exc))
                    return self._fail("error", text)
                return self._fail("error", self.describe(exc))
            # The step got through: the next one compacts only past the threshold (and may
            # itself be sent again once after a context error).
            self._overflowed = False
            outcome = await self._handle(reply)
            self._show_fill()
            if outcome is not None:
                return outcome

    def _learn_overflow(self, overflow: Overflow) -> bool:
        """What a context error tells: the prompt's real size, and the real window;
        whether that prompt itself fits (vLLM refuses a prompt plus its ``max_tokens``)."""
        if overflow.prompt_tokens:
            if self._before_refusal is None:
                self._before_refusal = self._p.calibration.copy()
            self._p.calibration.observe(self.steps.estimate, overflow.prompt_tokens)
        if overflow.window:
            self._p.windows.learn(self._p.model(), overflow.window)  # it decides
        return overflow.prompt_tokens is not None and self.steps.sizes().budget.fits(
            overflow.prompt_tokens
        )

    def note_problem(self, text: str) -> None:
        """A problem of the turn's own machinery (its checkpoint), shown and kept."""
        self._p.entry("error", text)

    def forget_refused(self) -> None:
        """The request the server refused left the history: its count measured it alone,
        not the requests that follow (measured from it, every later one would look as
        large and be refused unsent)."""
        if self._before_refusal is not None:
            self._p.calibration.restore(self._before_refusal)

    async def _handle(self, reply: _Reply) -> TurnOutcome | None:
        history = self._p.session.history
        if reply.runaway:
            return self._fail(
                "loop_stopped",
                f"Stopped: the model kept repeating the same text in its {reply.runaway}; "
                "the reply was cut off and discarded.",
            )
        self._take_printed_calls(reply)
        cap, why, fix = self._output_limit(reply)
        if reply.done_reason == "length" and not reply.calls and not reply.content.strip():
            return self._fail(
                "error",
                f"The reply was cut off at the output limit ({counted(cap, 'token')}) before "
                f"it said anything: {fix}.",
            )
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
        if reply.printed:
            names = ", ".join(c.name for c in reply.calls)
            what = "a tool call" if reply.printed == 1 else f"{reply.printed} tool calls"
            self._p.entry("system", f"Ran {what} the model printed as text ({names}).")
        cut = ""
        if reply.done_reason == "length":
            limit = counted(cap, "token")
            cut = f"The reply was cut off: the model hit its output limit ({limit}, {why})."
            self._p.entry("system", cut)
        if reply.content.strip():
            self._said = reply.content.strip()
        if not reply.calls:
            self._p.sink.emit(StateChange("ready"))
            if cut:  # a script must not take the start of an answer for all of it
                return TurnOutcome("cut_off", text=self._said, error=cut)
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

    def _output_limit(self, reply: _Reply) -> tuple[int, str, str]:
        """The cap that cut a reply off, what set it, and what gives the next one more."""
        configured = self._p.config.max_output_tokens
        if 0 < reply.cap < configured:
            window = f"{self.steps.window.tokens:,}-token context window"
            return reply.cap, f"all the room left in the {window}", "/compact or a larger window"
        return configured, "--max-output-tokens", "raise --max-output-tokens"

    def _take_printed_calls(self, reply: _Reply) -> None:
        """A reply whose text holds tool calls becomes those calls (unless turned off)."""
        if reply.calls or not reply.content or not self._p.config.text_tool_calls:
            return
        schemas: dict[str, Mapping[str, Any]] = {
            s["function"]["name"]: s["function"].get("parameters") or {}
            for s in self.rounds.tool_specs()
        }
        printed = printed_tool_calls(reply.content, schemas)
        if printed is not None:
            reply.calls, reply.content = list(printed.calls), printed.text
            reply.printed = len(printed.calls)

    def _fail(self, status: OutcomeStatus, message: str) -> TurnOutcome:
        self._p.entry("error", message)
        self._p.sink.emit(StateChange("error", message))
        return TurnOutcome(status, error=message)

    def describe(self, exc: ModelError) -> str:
        return describe_model_error(exc, self._p.client.kind, self._p.config.host, self._p.model())

    async def _fitted_request(self) -> ChatRequest:
        """The next request, compacted first when it would pass the threshold (or the
        server said it overflowed), with an output cap that stays inside the window."""
        request = self.steps.build(self.think)
        sizes = self.steps.sizes()
        prompt = self.steps.prompt_tokens()
        if not self._compact_next and sizes.budget.needs_compaction(prompt):
            # Measure before a compaction is decided on an estimate: a chat template that
            # drops the tool schemas makes the fixed part look several times its size, and
            # summarising a short history for it only makes it longer.
            await self._probe()
            prompt = self.steps.prompt_tokens()
        if self._compact_next or sizes.budget.needs_compaction(prompt):
            force, self._compact_next = self._compact_next, False
            await self.compact(force=force, auto=True)
            request = self.steps.build(self.think)
            sizes = self.steps.sizes()
            prompt = self.steps.prompt_tokens()
        if not sizes.budget.fits(prompt):
            # Only an estimate says the prompt does not fit: never send it to learn its
            # size (Ollama cuts a long prompt silently); have a small one counted.
            await self._probe()
            prompt = self.steps.prompt_tokens()
        if sizes.calibration.calibrated and not sizes.budget.fits(prompt):
            raise self._too_large(sizes, prompt)
        return attrs.evolve(request, num_predict=sizes.budget.reply_room(prompt))

    async def _probe(self) -> None:
        """Have the server count the fixed part, unless a count is known already; once a
        turn: a server that counts nothing is not asked again."""
        if self._p.calibration.calibrated or self._probed:
            return
        self._probed = True
        try:
            await self.steps.count_fixed(self.think)
        except ServerUnavailable:
            raise
        except ModelError as exc:
            # Only a measurement: the step goes on with the estimate, and its own request
            # meets whatever the server has to say.
            _log.debug("counting the fixed part failed: %r", exc)

    def _too_large(self, sizes: Sizes, prompt: int) -> _TooLarge:
        # The fixed part is measured by the counts from before a refusal: the refused
        # request's count is its own (a task of digits, a token each, would make the
        # system prompt look several times its size), and without earlier counts it is
        # not known.
        counted = self._before_refusal or sizes.calibration
        fixed = counted.tokens(self.steps.fixed_estimate)
        if counted.calibrated and not sizes.budget.fits(fixed):
            return _TooLarge(fixed_too_large(fixed, self.steps.window, self._p.client.kind.name))
        return _TooLarge(too_large_text(prompt, self.steps.window))

    async def compact(
        self, *, force: bool = False, focus: str = "", auto: bool = False
    ) -> Plan | None:
        """Compact the history (``force``: summarise even when trimming would do); the
        plan carried out, or None when there was nothing to do. A cancel or a failure
        changes nothing. Before a request (``auto``), a plan that cannot make it fit is
        not carried out: the turn ends at once instead of summarising for nothing."""
        self.steps.build(self.think)
        sizes = self.steps.sizes()
        history = self._p.session.history
        plan = plan_compaction(history, sizes, force=force)
        if auto and not plan.fits and sizes.calibration.calibrated:
            raise self._too_large(sizes, plan.before)
        if not plan.changes:
            return None
        self._p.sink.emit(StateChange("compacting"))
        done = await run_plan(
            plan,
            sizes,
            client=self._p.client,
            model=self._p.model(),
            temperature=self._p.config.temperature,
            focus=focus,
        )
        after = sizes.prompt(done.history)
        if after >= plan.before:
            # A record longer than the history it would replace: keep that history.
            n = done.replaced
            self._p.entry(
                "system",
                "compaction skipped: the summary would not be smaller than the "
                f"{n} message{'s' if n != 1 else ''} it replaces",
            )
            self.compaction_skipped = True
            return None
        line = done.line(history, plan.before, after)
        history[:] = done.history  # after the last await: all or nothing
        self._p.entry("system", line)
        self._show_fill()
        return plan

    def _show_fill(self) -> None:
        """Tell the status bar how full the next request will make the window."""
        self._p.sink.emit(self.steps.fill())

    async def warm(self) -> None:
        """Send this turn's first request with one output token and drop the reply: the
        model is loaded and the prompt cache filled. Only the token count is kept (it
        calibrates the prompt-size estimate); nothing enters the session."""
        try:
            await self._warm_once()
        except ModelHTTPError as exc:
            overflow = overflow_in(exc)
            if overflow is not None:
                # The first real step compacts; the warm-up only learns the sizes.
                self._learn_overflow(overflow)
                return
            if not (self.think and "does not support thinking" in exc.server_message):
                raise
            self.think = False
            await self._warm_once()
        self._show_fill()

    async def _warm_once(self) -> None:
        request = self.steps.build(self.think, num_predict=1)
        sizes = self.steps.sizes()
        if not sizes.budget.fits(self.steps.prompt_tokens()):
            # A history the window does not hold (a resumed session): the first step
            # compacts it, so its prefix is not worth caching, and Ollama would cut it.
            await self.steps.count_fixed(self.think)
            return
        await self.steps.count(request, self.steps.estimate)

    async def _stream(self) -> _Reply:
        try:
            return await self._stream_once()
        except ModelHTTPError as exc:
            # Models without thinking refuse think=true; ask once more without it.
            if not (self.think and "does not support thinking" in exc.server_message):
                raise
            self.think = False
            return await self._stream_once()

    async def _stream_once(self) -> _Reply:
        reply = self._reply = _Reply()
        request = await self._fitted_request()
        reply.cap = request.num_predict or 0
        self._p.sink.emit(StateChange("thinking"))
        content, thinking = RunawayDetector(), RunawayDetector()
        async with self._p.client.stream_chat(request) as chunks:
            async for chunk in chunks:
                self._take(reply, chunk)
                if content.feed(chunk.content) or thinking.feed(chunk.thinking):
                    # Leaving the stream closes the connection: the server stops generating.
                    reply.runaway = "reply" if content.tripped else "thinking"
                    break
        self._reply = None
        self._p.calibration.observe(self.steps.estimate, reply.prompt_tokens)
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
            reply.prompt_tokens = chunk.prompt_eval_count

    def interrupt(self) -> TurnOutcome:
        """After a cancel: show what streamed, answer unrun calls, add the stop marker. The
        outcome keeps what the model had said (the partial reply, else its last words in
        this turn): a script reading the result gets what the user saw."""
        if self._reply is not None and self._reply.content.strip():
            self._said = self._reply.content.strip()
            self._p.entry("assistant", self._said, {"partial": "yes"})
        self._reply = None
        self.rounds.cancel_pending()
        self._p.session.history.append(Message(role="assistant", content=STOP_MARKER))
        self._p.entry("system", "Response generation stopped by user.")
        self._p.sink.emit(StateChange("stopped"))
        return TurnOutcome("cancelled", text=self._said)
