"""A relayed turn's questions: they tell the message's sender that its task waits for this
instance's user, and they expire.

The relay exists so that one instance can hand another a task and move on; a question
nobody answers must not hold the receiver's queue for good, and its sender should know
why its task stands still. So ``ExpiringQuestions``, the app's ``Approver`` in front of the
approval line, does for a relayed turn's question (``origin == "relay"``; a local turn's
passes through unchanged and never expires):

1. tell the sender ``waiting``, with one line saying what the question is about
   (``waiting_reason``: ``asks its user to approve: make test``);
2. wait for the answer at most ``[relay] question_timeout`` seconds (0: as long as it
   takes); when none came, the question line goes away (its ``ask`` is cancelled) and
   ``QuestionExpired`` tells the agent, which answers the call as a no;
3. tell the sender ``started`` again, with how the question ended.

Once a question of a relayed turn expired, nobody is there: the turn's later questions are
not asked (``QuestionExpired`` with ``asked`` false, at once), so a relayed task holds the
queue for one timeout, not one per question. The next relayed task asks again.

A turn stopped while it asks (Escape, the app leaving) tells nothing here: its final
receipt follows. What the sender is told is ``Inbound``'s to decide (``asking``,
``answered``); ``QuestionWaits`` is how this reaches it (``RelayInbox``, the machine's feeder; the
relay link performs what it decides).
"""

from __future__ import annotations

import math
from typing import Protocol

import attrs
import trio

from zcoder.approval.questions import Answer, ApprovalRequest, Approver
from zcoder.errors import QuestionExpired
from zcoder.text.flat import one_line

__all__ = ["ExpiringQuestions", "QuestionWaits", "answered_detail", "waiting_reason"]

_SHOWN_CHARS = 200  # of the command or file in the reason: one line on the sender's screen


class QuestionWaits(Protocol):
    """What the machine's feeder (``RelayInbox``) does when the running relayed turn asks
    and goes on."""

    def question_asked(self, reason: str) -> None: ...
    def question_answered(self, detail: str, *, expired: bool) -> None: ...
    def unattended(self) -> bool: ...


def waiting_reason(request: ApprovalRequest) -> str:
    """The ``waiting`` receipt's one line: what the receiver's user is asked."""
    if request.kind == "command" and request.outside_sandbox:
        # As its question says: the sender's model knows the sandboxed way is still open.
        shown = one_line(request.text, _SHOWN_CHARS)
        return f"asks its user to approve running OUTSIDE the sandbox: {shown}"
    if request.kind == "command":
        return f"asks its user to approve: {one_line(request.text, _SHOWN_CHARS)}"
    if request.kind == "write":
        first = one_line(request.text.splitlines()[0] if request.text else "", _SHOWN_CHARS)
        return f"asks its user to approve a write to an instruction or control file: {first}"
    if request.kind == "tool":
        return f"asks its user to approve a call of the MCP tool {one_line(request.target, 100)}"
    return "asks its user to approve sending its reply to you"


def answered_detail(answer: Answer | None, seconds: float) -> str:
    """The ``started`` receipt's line after a question: how it ended (``None``: expired
    after ``seconds``)."""
    if answer is None:
        return f"nobody answered in {seconds:g} s (counted as no)"
    return "its user approved" if answer in ("y", "a") else "its user said no"


@attrs.frozen
class ExpiringQuestions:
    """An ``Approver``: a relayed turn's question tells its sender and expires after
    ``timeout`` seconds (0: never); any other question is ``inner``'s alone."""

    inner: Approver
    waits: QuestionWaits
    timeout: float

    async def ask(self, request: ApprovalRequest) -> Answer:
        if request.origin != "relay":
            return await self.inner.ask(request)
        if self.waits.unattended():
            raise QuestionExpired(self.timeout, asked=False)
        self.waits.question_asked(waiting_reason(request))
        answer: Answer | None = None
        with trio.move_on_after(self.timeout or math.inf):
            answer = await self.inner.ask(request)
        detail = answered_detail(answer, self.timeout)
        self.waits.question_answered(detail, expired=answer is None)
        if answer is None:
            raise QuestionExpired(self.timeout)
        return answer
