"""The questions a tool round asks the user: before a command runs and before a relay message
is sent. The decision itself is ``policy.py`` (pure); this module asks and applies it.

The calls it sees are checked already (``Toolbox.check``: the tool exists and the arguments
fit its schema), so it reads their arguments without checking them again. A command the tool
would refuse anyway (a ``cwd`` outside the workspace or missing, a blank command) is not asked
about: the tool answers it with its error, and the user is not asked to approve something
that cannot run. For a send, the approver itself may refuse by raising ``ToolError`` instead
of asking (the app's ``SendLabels`` does, when a fresh ping does not find the exact target
live): that error is the call's result.

A relayed turn's writes to instruction and control files (``policy.control_file``) ask
first, whatever the command policy, even under ``--yes``: kind ``write``, ``y``/``n``.

A command that runs in the sandbox is not asked about (``confinement`` says how it is
confined); one the model asks to run outside it (``outside_sandbox``) asks ``y``/``n`` and
the question says so.

A relayed turn's questions name its sender (``sender_label``), and in them ``a`` approves
the one command asked about: the question says so (``ApprovalRequest.a_grants``). A
relayed turn's question may expire (the app's approver raises ``QuestionExpired`` after
``[relay] question_timeout``): it counts as no, the model reads that the local user did not
answer in that time and nothing ran, the transcript says the question expired, and the
turn goes on; the turn's later questions are not asked (``asked`` false), and say so. A
local turn's question never expires.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from zcoder.agent.parts import CallOutcome, TurnParts, refusal
from zcoder.agent.turns import RelaySender
from zcoder.approval.policy import (
    DENIED_BY_POLICY,
    RELAY_DENIED,
    CommandVerdict,
    apply_answer,
    control_file,
    decide_command,
    decide_tool_call,
    denial_text,
)
from zcoder.approval.questions import Answer, ApprovalRequest
from zcoder.conversation import Origin
from zcoder.errors import QuestionExpired, ToolError, WorkspaceError
from zcoder.live import CommandsGranted, StateChange
from zcoder.sandbox.confine import confinement_for
from zcoder.sandbox.plan import Confinement
from zcoder.sandbox.probe import check_sandbox
from zcoder.tools.patch import parse_patch
from zcoder.tools.registry import CheckedCall
from zcoder.tools.shell import OUTSIDE_SANDBOX
from zcoder.tools.workspace import existing_dir

__all__ = ["SEND", "Approvals", "sender_label"]

SEND = "send_agent_message"
_WRITES = ("write_file", "replace_text", "apply_patch")
_UNSANDBOXED_TEXT = "the sandbox cannot work here"


def _outside_asked(call: CheckedCall) -> str:
    """The model's reason to run this command outside the sandbox ("": none given)."""
    return str(call.arguments.get(OUTSIDE_SANDBOX) or "").strip()


def outside_denial(command: str) -> str:
    return (
        f"user denied running this command outside the sandbox: {command} (without "
        f"{OUTSIDE_SANDBOX} it runs in the sandbox)"
    )


def _written(call: CheckedCall) -> list[str]:
    """The workspace paths a write call names (as given; the tool checks them)."""
    if call.name != "apply_patch":
        return [call.arguments["path"]]
    try:
        patches = parse_patch(call.arguments["patch"])
    except ToolError:
        return []  # the tool itself reports the bad patch
    return [p for f in patches for p in (f.old_path, f.new_path) if p is not None]


def sender_label(sender: RelaySender) -> str:
    """Who relayed a turn, as its questions name it: ``weekly-digest (pid 42302)``, with
    ``unverified`` added when peer credentials did not confirm the pid (the project name is
    the sender's own word either way)."""
    check = "" if sender.verified else ", unverified"
    return f"{sender.project} (pid {sender.pid}{check})"


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
        self._who = sender_label(sender) if sender is not None else ""
        self._home = _user_home()

    async def _ask(
        self, question: ApprovalRequest, undone: str, retry: str = ""
    ) -> Answer | CallOutcome:
        """The user's answer; or, for a question nobody answered in time (only a relayed
        turn's expires), the call's refusal: ``undone`` says what did not happen, ``retry``
        (told the model alone) what it can still do."""
        try:
            return await self._p.approver.ask(question)
        except QuestionExpired as exc:
            seconds = f"{exc.seconds:g}"
            if exc.asked:
                line = f"The question expired: nobody answered in {seconds} s, so {undone}."
                told = f"the local user did not answer in {seconds} seconds: {undone}"
                card = f"the question expired (no answer in {seconds} s)"
            else:
                line = (
                    f"Not asked: nobody answered this relayed task's earlier question in "
                    f"{seconds} s, so {undone}."
                )
                told = (
                    f"not asked: the local user did not answer an earlier question of this "
                    f"task in {seconds} seconds, so {undone}"
                )
                card = "not asked (an earlier question expired)"
            self._p.entry("system", line)
            return refusal(
                f"{told} (nothing ran). {retry}Go on without it, or finish and say what is "
                "left to do.",
                "denied",
                card,
            )

    async def check(self, call: CheckedCall) -> CallOutcome | None:
        """A refusal for ``call``, or None when it may run."""
        asks = self._p.toolbox.asks(call.name)
        if asks != "never":
            return await self._tool(call, asks)
        if call.name == "run_command":
            return await self._command(call)
        if call.name == SEND:
            return await self._send(call)
        if call.name in _WRITES and self._origin == "relay":
            return await self._write(call)
        return None

    async def _tool(
        self, call: CheckedCall, asks: Literal["always", "relayed"]
    ) -> CallOutcome | None:
        """A tool that asks for itself (an MCP server's): ``decide_tool_call``."""
        config = self._p.config
        verdict = decide_tool_call(
            asks, policy=config.command_policy, profile=config.profile, origin=self._origin
        )
        if verdict == "run":
            return None
        if verdict == "deny":
            return refusal(
                f"{DENIED_BY_POLICY}; {call.name} was not called", "denied", "tools denied"
            )
        question = ApprovalRequest(
            kind="tool",
            text=json.dumps(dict(call.arguments), ensure_ascii=False, indent=1),
            choices=("y", "n"),
            origin=self._origin,
            target=call.name,
            sender=self._who,
        )
        self._p.sink.emit(StateChange("waiting_approval", "tool"))
        answer = await self._ask(question, f"{call.name} was not called")
        if answer == "y":
            return None
        if isinstance(answer, CallOutcome):
            return answer
        return refusal(f"user denied the call of {call.name}", "denied", "denied by the user")

    def _control_files(self, call: CheckedCall) -> list[str]:
        config = self._p.config
        out = []
        for shown in dict.fromkeys(_written(call)):
            # Where a symlink leads counts too: ``notes -> .git/hooks`` is still .git.
            forms = [Path(shown), Path(os.path.realpath(config.workspace / shown))]
            why = control_file(shown, forms, workspace=config.workspace, home=config.home)
            if why:
                out.append(why)
        return out

    async def _write(self, call: CheckedCall) -> CallOutcome | None:
        reasons = self._control_files(call)
        if not reasons:
            return None
        question = ApprovalRequest(
            kind="write",
            text="\n".join(reasons),
            choices=("y", "n"),
            origin=self._origin,
            sender=self._who,
        )
        self._p.sink.emit(StateChange("waiting_approval", "write"))
        answer = await self._ask(question, "nothing was written")
        if answer == "y":
            return None
        if isinstance(answer, CallOutcome):
            return answer
        text = f"user denied the write to an instruction or control file: {reasons[0]}"
        return refusal(text, "denied", "write to a control file denied")

    def _tool_refuses(self, command: str, cwd: str) -> bool:
        """True when ``run_command`` will refuse the command without running it."""
        if not command.strip() or "\0" in command:
            return True
        try:
            existing_dir(self._p.config.workspace, cwd)
        except (ToolError, WorkspaceError):
            return True
        return False

    async def _command(self, call: CheckedCall) -> CallOutcome | None:
        command, cwd, config = call.arguments["command"], call.arguments["cwd"], self._p.config
        if self._tool_refuses(command, cwd):
            return None  # the tool itself reports the bad call
        shown_cwd = _join(config.workspace, cwd)
        verdict = self._verdict(command, Path(shown_cwd), bool(_outside_asked(call)))
        if verdict.action == "run":
            if verdict.sandboxed and not (found := check_sandbox()).works:
                # Never unsandboxed by surprise (start-up refuses this; a late check too).
                text = f"Error: the sandbox cannot work here: {found.line()}; nothing ran"
                return refusal(text, "failed", "the sandbox cannot work here")
            return None
        if verdict.action == "blocked":
            # The card says why, as the model's result does ("mkfs.ext4 formats a filesystem").
            why = verdict.reason.removeprefix("blocked: ")
            return refusal(verdict.reason, "denied", f"blocked by the safety guard: {why}")
        if verdict.action == "deny":
            # A receiver whose own commands ask says whose are denied.
            card = (
                "relayed commands denied" if verdict.reason == RELAY_DENIED else "commands denied"
            )
            return refusal(verdict.reason or denial_text(command), "denied", card)
        _, a_grants = apply_answer("a", origin=self._origin, profile=config.profile)
        outside = f"its reason: {_outside_asked(call)}" if verdict.outside else ""
        if self._origin in config.unsandboxed and not outside:
            outside = _UNSANDBOXED_TEXT  # asked for, but it cannot work: say so
        question = ApprovalRequest(
            kind="command",
            text=command,
            choices=verdict.choices,
            origin=self._origin,
            cwd=shown_cwd,
            sender=self._who,
            a_grants=a_grants,
            outside_sandbox=outside,
        )
        self._p.sink.emit(StateChange("waiting_approval", "command"))
        # Asked to run outside: in the sandbox it needs no question, so an expiry does not
        # end what a relayed task nobody watches can do.
        retry = (
            f"Without {OUTSIDE_SANDBOX} it runs in the sandbox, unasked. "
            if verdict.outside
            else ""
        )
        answer = await self._ask(question, "the command did not run", retry)
        if isinstance(answer, CallOutcome):
            return answer
        run_this, grant_rest = apply_answer(answer, origin=self._origin, profile=config.profile)
        if grant_rest:
            self._p.conversation.grant_commands()
            self._p.sink.emit(CommandsGranted(True))
        if run_this:
            return None
        if verdict.outside:
            return refusal(outside_denial(command), "denied", "outside the sandbox: denied")
        return refusal(denial_text(command), "denied", "denied by the user")

    def confinement(self, call: CheckedCall) -> Confinement | None:
        """How a permitted ``run_command`` call runs: in the sandbox (its confinement), or
        None (as the user: no sandbox applies, or the user said yes to running it
        outside). The decision is ``_command``'s, taken again: it is pure and the same."""
        if call.name != "run_command":
            return None
        config = self._p.config
        cwd = Path(_join(config.workspace, call.arguments["cwd"]))
        verdict = self._verdict(call.arguments["command"], cwd, bool(_outside_asked(call)))
        if verdict.action != "run" or not verdict.sandboxed:
            return None
        return confinement_for(config, check_sandbox().bwrap, os.environ)

    def _verdict(self, command: str, cwd: Path, outside: bool = False) -> CommandVerdict:
        config = self._p.config
        return decide_command(
            command,
            policy=config.command_policy,
            profile=config.profile,
            origin=self._origin,
            granted=self._p.conversation.commands_granted,
            workspace=config.workspace,
            home=self._home,
            cwd=cwd,
            relay_commands=config.relay.commands,
            outside=outside,
        )

    async def _send(self, call: CheckedCall) -> CallOutcome | None:
        target, message = call.arguments["target_instance_id"], call.arguments["message"]
        if self._sender is not None and target != self._sender.instance_id:
            text = f"Error: relayed turns may only reply to their sender {self._sender.instance_id}"
            return refusal(text, "failed", "a relayed turn may only reply to its sender")
        if not message.strip():
            return None  # the tool itself reports the bad call
        question = ApprovalRequest(
            kind="send",
            text=message,
            choices=("y", "n"),
            origin=self._origin,
            target=target,
            sender=self._who,
        )
        self._p.sink.emit(StateChange("waiting_approval", "send"))
        try:
            answer = await self._ask(question, "the message was not sent")
        except ToolError as exc:  # the relay refused the send before asking: no question
            return refusal(f"Error: {exc}", "failed", str(exc))
        if answer == "y":
            return None
        if isinstance(answer, CallOutcome):
            return answer
        return refusal(f"user denied sending the message to {target}", "denied", "send denied")
