"""Approval questions: what the agent asks the local user, and who answers.

The one-shot mode answers on ``/dev/tty`` (deny when there is none); the interactive app
answers with an approval line. Pure data and a protocol, floor 1.
"""

from __future__ import annotations

from typing import Literal, Protocol

import attrs

from zcoder.conversation import Origin
from zcoder.text.flat import one_line
from zcoder.text.visible import escape_controls

__all__ = ["Answer", "ApprovalRequest", "Approver", "question_head"]

Answer = Literal["y", "a", "n"]


@attrs.frozen
class ApprovalRequest:
    """One question. ``kind`` is ``command`` (run_command), ``send`` (send_agent_message) or
    ``write`` (a relayed turn's write to an instruction or control file; ``text`` says which
    files and why, one per line) or ``tool`` (an MCP server's tool: ``target`` is its name,
    ``text`` its arguments as JSON).

    ``choices`` lists the answers the policy allows here: ``("y", "a", "n")`` for a command
    in the coding profile, ``("y", "n")`` in sysadmin and for sends. ``a_grants`` says what
    ``a`` means: the rest of the conversation's commands too (a local turn), or only this
    command (``False``: a relayed turn, which never grants anything). ``text`` is the exact
    command or message; ``cwd``/``target`` give context; ``sender`` names who relayed the
    turn (``weekly-digest (pid 42302)``), empty in a local turn.
    """

    kind: Literal["command", "send", "write", "tool"]
    text: str
    choices: tuple[Answer, ...]
    origin: Origin = "user"
    cwd: str = ""
    target: str = ""
    sender: str = ""
    # True unless told otherwise: claiming a grant that is not given errs on the safe side.
    a_grants: bool = True
    # A command to run outside the sandbox: why ("its reason: ...", "the sandbox cannot
    # work here"); "" when no sandbox is in question.
    outside_sandbox: str = ""


def _shown(text: str) -> str:
    return escape_controls(one_line(text))


def _who(request: ApprovalRequest) -> str:
    """Who is driving: the model of a local turn, or the sender of a relayed one."""
    if request.origin != "relay":
        return "The model"
    if not request.sender:
        return "A relayed request"
    return f"A relayed request from {_shown(request.sender)}"


def question_head(request: ApprovalRequest) -> str:
    """The question's first line, the same words in the app and on one-shot's terminal
    (``The model wants to run this command in /w:``), on one line with its control
    characters made visible."""
    who = _who(request)
    if request.kind == "send" and request.origin == "relay":
        # A relayed turn may send only to its sender: a reply, not a task passed on.
        return f"{who} wants to send a reply back to {_shown(request.target)}:"
    if request.kind == "send":
        return f"{who} wants to send a message to {_shown(request.target)}:"
    if request.kind == "write":
        return f"{who} wants to write an instruction or control file:"
    if request.kind == "tool":
        return f"{who} wants to call the MCP tool {_shown(request.target)} with:"
    where = f" in {_shown(request.cwd)}" if request.cwd else ""
    if request.outside_sandbox:
        why = _shown(request.outside_sandbox)
        return f"{who} wants to run this command OUTSIDE the sandbox{where} ({why}):"
    return f"{who} wants to run this command{where}:"


class Approver(Protocol):
    """Asks the local user. Returns ``"n"`` when the question is dismissed (Escape); the
    app's raises ``QuestionExpired`` when nobody answered a relayed turn's question in time."""

    async def ask(self, request: ApprovalRequest) -> Answer: ...
