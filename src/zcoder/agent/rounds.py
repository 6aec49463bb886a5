"""One tool round of a turn: approvals, the relay reply restriction, ``finish``, and the
tool results that keep the history valid (every call answered, in order).

Each call's arguments are checked once, by ``Toolbox.check``, before anything else looks at
them: a call that does not fit its tool's schema is answered with that error and is neither
asked about nor run; the approvals and the tool get the checked arguments.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from zcoder.agent.approvals import SEND, Approvals
from zcoder.agent.parts import CallOutcome, TurnParts, refusal
from zcoder.agent.servers import ServerKind
from zcoder.agent.turns import RelaySender, TurnOutcome
from zcoder.approval.policy import commands_sandboxed
from zcoder.conversation import Message, Origin, ToolCall
from zcoder.errors import (
    IncompleteStream,
    LocalServerExited,
    MalformedStream,
    ModelError,
    ModelHTTPError,
    NoServerFound,
    ServerUnavailable,
    StreamErrorLine,
    StreamStalled,
)
from zcoder.live import StateChange, ToolState, ToolUpdate
from zcoder.text.flat import one_line
from zcoder.tools.base import ToolContext, ToolResult
from zcoder.tools.registry import CheckedCall
from zcoder.tools.shell import OUTSIDE_SANDBOX, sandbox_note
from zcoder.tools.workspace import resolved_names

__all__ = ["CANCELLED_TEXT", "INTERRUPTED_TEXT", "RoundRunner", "describe_model_error"]

_log = logging.getLogger(__name__)

CANCELLED_TEXT = "not executed because the user cancelled"
INTERRUPTED_TEXT = "interrupted because the user cancelled"


def _one_line(text: str, limit: int = 300) -> str:
    return one_line(text, limit)


def describe_model_error(exc: ModelError, kind: ServerKind, host: str, model: str) -> str:
    """One line for the transcript that says what failed and what to do about it, naming
    the kind of server the client speaks to (``ModelClient.kind``) and that kind's own fix."""
    name = kind.name
    if isinstance(exc, (NoServerFound, LocalServerExited)):
        return str(exc)
    if isinstance(exc, ServerUnavailable):
        # The cause tells "nothing listens" from "something else answered on that port".
        why = f" ({_one_line(exc.reason, 120)})" if exc.reason else ""
        where = "(or point --host at the server that runs)"
        return f"{name} is not reachable at {host}{why}: {kind.start} {where}"
    if isinstance(exc, ModelHTTPError):
        return _describe_http(exc, kind, host, model)
    prefix = {
        StreamStalled: f"{name} stopped sending (stalled stream)",
        MalformedStream: f"{name} sent an invalid reply",
        StreamErrorLine: f"{name} reported an error",
        IncompleteStream: f"the reply from {name} ended early",
    }.get(type(exc), f"the request to {name} failed")
    return _one_line(f"{prefix}: {exc}")


def _describe_http(exc: ModelHTTPError, kind: ServerKind, host: str, model: str) -> str:
    text = exc.server_message.lower()
    if exc.model_missing or (exc.status == 404 and "model" in text and "not found" in text):
        fix = kind.missing_model_fix(model)
        return _one_line(f"model '{model}' not found on {kind.name}: {fix}")
    if exc.speaks_openai:
        return (
            f"{host} is not an Ollama server: it speaks the OpenAI-compatible API; "
            "use --api openai or a host ending in /v1"
        )
    return _one_line(f"{kind.name} error (HTTP {exc.status}): {exc.server_message}")


def _restrict_send(spec: dict[str, Any], sender_id: str) -> dict[str, Any]:
    """The send tool of a relayed turn: its target can only be the sender."""
    spec = copy.deepcopy(spec)
    function = spec["function"]
    params = function.setdefault("parameters", {"type": "object"})
    props = params.setdefault("properties", {})
    props["target_instance_id"] = {
        "type": "string",
        "enum": [sender_id],
        "description": f"Must be {sender_id}, the sender of the relayed task.",
    }
    function["description"] = (
        f"{function.get('description', '')} In this relayed turn it may only reply to "
        f"the sender {sender_id}."
    ).strip()
    return spec


def _sandbox_spec(spec: dict[str, Any], sandboxed: bool, network: bool) -> dict[str, Any]:
    """``run_command`` as this turn offers it: in a sandboxed turn it says so and takes
    ``outside_sandbox``; elsewhere that argument is not offered (it would mean nothing)."""
    spec = copy.deepcopy(spec)
    function = spec["function"]
    if sandboxed:
        function["description"] = function.get("description", "") + sandbox_note(network)
    else:
        function.get("parameters", {}).get("properties", {}).pop(OUTSIDE_SANDBOX, None)
    return spec


def _name(spec: Mapping[str, Any]) -> str:
    return str(spec.get("function", {}).get("name", ""))


class RoundRunner:
    """Runs the tool calls of each round in order and answers every one of them."""

    def __init__(self, parts: TurnParts, origin: Origin, sender: RelaySender | None) -> None:
        self._p = parts
        self._origin: Origin = origin
        self._sender = sender
        self._pending: list[tuple[str, ToolCall]] = []
        self._running = ""
        self._specs: list[dict[str, Any]] | None = None
        self._approvals = Approvals(parts, origin, sender)

    def tool_specs(self) -> list[dict[str, Any]]:
        if self._specs is None:
            specs = [s.to_ollama() for s in self._p.toolbox.specs()]
            config = self._p.config
            sandboxed = commands_sandboxed(
                config.command_policy, config.profile, self._origin, config.relay.commands
            )
            specs = [
                _sandbox_spec(s, sandboxed, config.sandbox_network)
                if _name(s) == "run_command"
                else s
                for s in specs
            ]
            if self._sender is not None:
                sid = self._sender.instance_id
                specs = [_restrict_send(s, sid) if _name(s) == SEND else s for s in specs]
            self._specs = specs
        return self._specs

    def refuse(self, calls: Sequence[ToolCall], reason: str) -> None:
        """Answer a whole round without running it."""
        for call in calls:
            self._p.session.history.append(
                Message(role="tool", tool_name=call.name, content=f"Error: not executed: {reason}")
            )

    async def run(self, calls: Sequence[ToolCall], step: int) -> TurnOutcome | None:
        """Run one round; an outcome when ``finish`` ended the turn."""
        if len(calls) == 1 and calls[0].name == "finish":
            return self._finish(f"{step}.0", calls[0])
        self._pending = [(f"{step}.{i}", call) for i, call in enumerate(calls)]
        for key, call in self._pending:
            if call.name != "finish":
                self._update(key, call, "pending")
        while self._pending:
            key, call = self._pending[0]
            self._answer(key, call, await self._dispatch(key, call))
        return None

    def cancel_pending(self) -> None:
        """After a cancel: answer every call of the round that has no result yet."""
        while self._pending:
            key, call = self._pending[0]
            text = INTERRUPTED_TEXT if key == self._running else CANCELLED_TEXT
            self._answer(key, call, refusal(text, "interrupted", text))

    def _target(self, call: ToolCall) -> str:
        return self._p.toolbox.target_of(call.name, call.arguments)

    def _update(
        self, key: str, call: ToolCall, state: ToolState, result: ToolResult | None = None
    ) -> None:
        done = result if result is not None else ToolResult("")
        target = self._target(call)
        self._p.sink.emit(ToolUpdate(key, call.name, target, state, done, call.arguments))

    def _answer(self, key: str, call: ToolCall, answer: CallOutcome) -> None:
        result, state = answer.result, answer.state
        self._pending = [p for p in self._pending if p[0] != key]
        self._running = ""
        self._p.session.history.append(
            Message(role="tool", tool_name=call.name, content=result.text)
        )
        if call.name == "finish":
            return
        if not result.summary:
            result = attrs.evolve(result, summary=_one_line(result.text, 200))
        _log.debug("tool %s %s (%s): %s", call.name, state, self._target(call), result.summary)
        self._update(key, call, state, result)
        meta = {**result.meta, "name": call.name, "target": self._target(call), "state": state}
        if result.diff:
            meta["diff"] = result.diff
        self._p.entry("tool", result.summary, meta)

    def _check(self, call: ToolCall) -> CheckedCall | CallOutcome:
        """The call with its arguments checked (once, here), or the error that answers it."""
        if call.problem:
            text = f"Error: invalid arguments for {call.name}: {call.problem}"
            return refusal(text + "; send them as a JSON object", "failed", call.problem)
        checked = self._p.toolbox.check(call.name, call.arguments)
        if isinstance(checked, ToolResult):
            return CallOutcome(checked, "failed")
        return checked

    async def _dispatch(self, key: str, call: ToolCall) -> CallOutcome:
        if call.name == "finish" and not call.problem:  # unreadable arguments are told first
            text = "Error: finish must be the only tool call of its step; call finish again, alone"
            return refusal(text, "failed", "finish was not called alone")
        checked = self._check(call)
        if isinstance(checked, CallOutcome):
            return checked
        refused = await self._approvals.check(checked)
        if refused is not None:
            return refused
        await self._checkpoint(checked)
        self._running = key
        self._update(key, call, "running")
        self._p.sink.emit(StateChange("running_tool", call.name))
        context = ToolContext(
            workspace=self._p.config.workspace,
            hops=self._onward_hops(),
            sandbox=self._approvals.confinement(checked),
        )
        result = await self._p.toolbox.run(checked, context)
        return CallOutcome(result, "completed" if result.ok else "failed")

    async def _checkpoint(self, call: CheckedCall) -> None:
        """Before a call that may change files: the turn's checkpoint (taken once)."""
        toolbox = self._p.toolbox
        if self._p.before_change is None or not toolbox.may_change_files(call.name):
            return
        # As the tools will write them: a symlinked directory is followed, as git sees it.
        written = toolbox.paths_written(call.name, call.arguments)
        problem = await self._p.before_change(resolved_names(self._p.config.workspace, written))
        if problem:
            self._p.entry("error", problem)

    def _onward_hops(self) -> int:
        """The hop count of a message sent from this turn: 0 in the local user's turn, one
        more than the relayed message's own (a peer that sent none counts as 0)."""
        if self._sender is None:
            return 0
        return (self._sender.hops or 0) + 1

    def _finish(self, key: str, call: ToolCall) -> TurnOutcome | None:
        checked = self._check(call)
        if isinstance(checked, CallOutcome):
            self._answer(key, call, checked)
            return None
        status, response = checked.arguments["status"], checked.arguments["response"].strip()
        self._answer(key, call, CallOutcome(ToolResult(f"Turn finished ({status})."), "completed"))
        if response:
            self._p.entry("assistant", response, {"finish": status})
        self._p.sink.emit(StateChange("ready"))
        return TurnOutcome("complete" if status == "complete" else "blocked", text=response)
