"""Approval questions: what the agent asks the local user, and who answers.

The one-shot mode answers on ``/dev/tty`` (deny when there is none); the interactive app
answers with an approval line. Pure data and a protocol, floor 1.
"""

from __future__ import annotations

from typing import Literal, Protocol

import attrs

from zcoder.conversation import Origin

__all__ = ["Answer", "ApprovalRequest", "Approver"]

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


class Approver(Protocol):
    """Asks the local user. Returns ``"n"`` when the question is dismissed (Escape)."""

    async def ask(self, request: ApprovalRequest) -> Answer: ...
