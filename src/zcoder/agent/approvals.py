"""The questions a tool round asks the user: before a command runs and before a relay message
is sent. The decision itself is ``policy.py`` (pure); this module asks and applies it.

A call the tool would refuse anyway (arguments that do not fit its schema, a ``cwd`` outside
the workspace) is not asked about: the tool answers it with its error, and the user is not
asked to approve something that cannot run. For a send, the approver itself may refuse by
raising ``ToolError`` instead of asking (the app's ``SendLabels`` does, when a fresh ping
does not find the exact target live): that error is the call's result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zcoder.agent.turns import RelaySender
from zcoder.approval import ApprovalRequest
from zcoder.conversation import Origin, ToolCall
from zcoder.errors import ToolError, WorkspaceError
from zcoder.live import StateChange, ToolState
from zcoder.policy import CommandVerdict, apply_answer, decide_command, denial_text
from zcoder.tools.base import ToolResult
from zcoder.tools.schema import check_arguments
from zcoder.tools.workspace import existing_dir

if TYPE_CHECKING:
    from zcoder.agent.rounds import TurnParts

__all__ = ["SEND", "Approvals", "Refusal", "refusal"]

SEND = "send_agent_message"
Refusal = tuple[ToolResult, ToolState]


def refusal(text: str, state: ToolState, summary: str) -> Refusal:
    return ToolResult(text, ok=False, summary=summary), state


def _join(workspace: Path, cwd: str) -> str:
    """The cwd as the user should see it (lexically normalised; the tool checks it)."""
    return os.path.normpath(workspace / cwd)


def _user_home() -> Path:
    """The directory the sysadmin guard protects as ``~``."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return Path("/root") if os.getuid() == 0 else Path("/")


class Approvals:
    """Asks for the calls of one turn that need the user's yes."""

    def __init__(self, parts: TurnParts, origin: Origin, sender: RelaySender | None) -> None:
        self._p = parts
        self._origin: Origin = origin
        self._sender = sender
        self._home = _user_home()

    async def check(self, call: ToolCall) -> Refusal | None:
        """A refusal for ``call``, or None when it may run."""
        if call.name == "run_command" and not self._doomed(call):
            return await self._command(call.arguments)
        if call.name == SEND:
            return await self._send(call)
        return None

    def _doomed(self, call: ToolCall) -> bool:
        """True when the tool will refuse the call without running it."""
        spec = next((s for s in self._p.toolbox.specs() if s.name == call.name), None)
        try:
            args = check_arguments(spec.parameters, call.arguments) if spec else call.arguments
            if call.name == "run_command":
                existing_dir(self._p.config.workspace, str(args.get("cwd", ".")))
        except (ToolError, WorkspaceError):
            return True
        return False

    async def _command(self, args: Mapping[str, Any]) -> Refusal | None:
        command, config = args.get("command"), self._p.config
        if not isinstance(command, str) or not command.strip():
            return None  # the tool itself reports the bad call
        cwd = args.get("cwd", ".")
        shown_cwd = _join(config.workspace, cwd if isinstance(cwd, str) else ".")
        verdict = self._verdict(command, Path(shown_cwd))
        if verdict.action == "run":
            return None
        if verdict.action == "blocked":
            # The card says why, as the model's result does ("mkfs.ext4 formats a filesystem").
            why = verdict.reason.removeprefix("blocked: ")
            return refusal(verdict.reason, "denied", f"blocked by the safety guard: {why}")
        if verdict.action == "deny":
            return refusal(verdict.reason or denial_text(command), "denied", "commands denied")
        question = ApprovalRequest(
            kind="command",
            text=command,
            choices=verdict.choices,
            origin=self._origin,
            cwd=shown_cwd,
        )
        self._p.sink.emit(StateChange("waiting_approval", "command"))
        answer = await self._p.approver.ask(question)
        run_this, grant_rest = apply_answer(answer, origin=self._origin, profile=config.profile)
        if grant_rest:
            self._p.granted = True
        return None if run_this else refusal(denial_text(command), "denied", "denied by the user")

    def _verdict(self, command: str, cwd: Path) -> CommandVerdict:
        config = self._p.config
        return decide_command(
            command,
            policy=config.command_policy,
            profile=config.profile,
            origin=self._origin,
            granted=self._p.granted,
            workspace=config.workspace,
            home=self._home,
            cwd=cwd,
        )

    async def _send(self, call: ToolCall) -> Refusal | None:
        target, message = call.arguments.get("target_instance_id"), call.arguments.get("message")
        if self._sender is not None and target != self._sender.instance_id:
            text = f"Error: relayed turns may only reply to their sender {self._sender.instance_id}"
            return refusal(text, "failed", "a relayed turn may only reply to its sender")
        if self._doomed(call) or not isinstance(target, str) or not isinstance(message, str):
            return None  # the tool itself reports the bad call
        if not message.strip():
            return None
        question = ApprovalRequest(
            kind="send", text=message, choices=("y", "n"), origin=self._origin, target=target
        )
        self._p.sink.emit(StateChange("waiting_approval", "send"))
        try:
            answer = await self._p.approver.ask(question)
        except ToolError as exc:  # the relay refused the send before asking: no question
            return refusal(f"Error: {exc}", "failed", str(exc))
        if answer == "y":
            return None
        return refusal(f"user denied sending the message to {target}", "denied", "send denied")
