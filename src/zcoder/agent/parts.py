"""What a turn works with: its frozen dependencies (``TurnParts``), the one piece of
conversation state a turn changes besides the session (``Conversation``, owner of the
user's ``a`` grant), and the named answer to one tool call (``CallOutcome``).

Pure data; every module of the turn (``loop``, ``rounds``, ``approvals``) imports it and it
imports none of them, so the turn's modules form no import cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from zcoder.agent.context import Calibration
from zcoder.agent.model import ModelClient
from zcoder.agent.windows import Windows
from zcoder.approval.questions import Approver
from zcoder.config import Config
from zcoder.conversation import EventRole, TranscriptEvent
from zcoder.live import Entry, ToolState, TurnSink
from zcoder.tools.base import ToolResult

if TYPE_CHECKING:
    from zcoder.session.store import Session
    from zcoder.tools.registry import Toolbox

__all__ = ["CallOutcome", "Conversation", "TurnParts", "refusal"]


class Conversation:
    """One conversation as the agent holds it: its session and the user's ``a`` grant.

    The grant has this one owner: an approval in a local turn sets it (``grant_commands``)
    and it lasts as long as this object. The agent makes a new ``Conversation`` for another
    session, so a grant never carries over; whether an answer grants anything at all is
    ``policy.apply_answer``'s to say (never in a relayed turn).
    """

    __slots__ = ("_granted", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self._granted = False

    @property
    def commands_granted(self) -> bool:
        """True once the user answered ``a``: later commands of a local turn run unasked."""
        return self._granted

    def grant_commands(self) -> None:
        self._granted = True


@attrs.frozen
class TurnParts:
    """What one turn works with; none of it changes during the turn.

    ``model`` reads the agent's current model name; ``calibration`` is the model's
    token-count correction (the agent keeps one per model and the turn feeds it);
    ``windows`` is the agent's, the one owner of the window (the turn reads it there and
    tells it a context error's window at once).
    ``before_change`` is awaited before each tool call that may change files, with the
    paths a file tool names (the turn's checkpoint); it returns a problem line, or ``""``.
    """

    config: Config
    client: ModelClient
    toolbox: Toolbox
    approver: Approver
    sink: TurnSink
    conversation: Conversation
    model: Callable[[], str]
    windows: Windows
    calibration: Calibration = attrs.Factory(Calibration)
    before_change: Callable[[Sequence[str]], Awaitable[str]] | None = None

    @property
    def session(self) -> Session:
        return self.conversation.session

    def entry(self, role: EventRole, text: str, meta: Mapping[str, str] | None = None) -> None:
        """Persist a visible transcript entry in the session and show it."""
        event = TranscriptEvent(role=role, text=text, meta=meta or {})
        self.session.events.append(event)
        self.sink.emit(Entry(event))


@attrs.frozen
class CallOutcome:
    """How one tool call was answered: the result the model gets (and the card shows) and
    the state of its card."""

    result: ToolResult
    state: ToolState


def refusal(text: str, state: ToolState, summary: str) -> CallOutcome:
    """A call answered without running: ``text`` for the model, ``summary`` for the card."""
    return CallOutcome(ToolResult(text, ok=False, summary=summary), state)
