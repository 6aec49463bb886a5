"""The worker's ``WorkBackend``: the turns it runs (the user's and the relayed ones), the
model checks between them, and the relay's changes it follows.

The state of every incoming message is the ``Inbound`` machine, fed by the worker's
``RelayInbox``; this object only runs what the machine lets run and tells the inbox what
became of the turn (reached the model, ended with an outcome, never reached it): it keeps
no relay state of its own.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

from zcoder.agent.agent import Agent, RelaySender, TurnRequest
from zcoder.agent.turns import TurnOutcome
from zcoder.app.relay.inbox import RelayInbox
from zcoder.app.relay.link import RelayLink
from zcoder.app.relay.receipts import ChangeRecorder, final_state
from zcoder.app.server import ModelServer
from zcoder.app.worker import NOT_SENT, RelayTurn
from zcoder.conversation import TranscriptEvent
from zcoder.errors import ModelError
from zcoder.live import Entry, TurnSink
from zcoder.relay.spool.store import Claimed
from zcoder.tools.base import Tool
from zcoder.ui.agents_text import stopped_notice
from zcoder.ui.inbound_text import Say

__all__ = ["TurnRunner"]

_log = logging.getLogger(__name__)


class TurnRunner:
    """Runs turns on ``agent`` for the worker; ``sink`` shows what happened."""

    def __init__(
        self,
        agent: Agent,
        relay: RelayLink,
        inbox: RelayInbox,
        server: ModelServer,
        sink: TurnSink,
        changes: ChangeRecorder,
        on_tools: Callable[[Sequence[Tool]], None],
        tools: Sequence[Tool],
    ) -> None:
        self._agent = agent
        self._relay = relay
        self._inbox = inbox
        self._on_tools = on_tools
        self._tools = tools
        self._server = server
        self._sink = sink
        self._changes = changes

    # -- turns ----------------------------------------------------------------------------

    async def run_turn(self, text: str) -> str:
        self._inbox.local_turn()  # the user is in the loop again
        outcome = await self._agent.run_turn(TurnRequest("user", text))
        if outcome.reached_model:
            self._model_answers(True)
        elif outcome.status == "error":
            self._model_answers(False)
            return NOT_SENT  # the agent took it out of the history: the user has it back
        return outcome.status

    def cancel_turn(self) -> bool:
        return self._agent.cancel_turn()

    def set_busy(self, busy: bool) -> None:
        """The worker started (``True``) or ended a turn: the manifest says ``busy`` or
        ``ready`` to the other instances."""
        self._relay.refresh(state="busy" if busy else "ready")

    async def check_model(self) -> str:
        check = await self._server.check()
        if check.sole:
            asked = self._agent.model
            self._agent.set_model(check.sole)
            self._relay.refresh(model=check.sole)
            self._say(
                [
                    Say(
                        f"Model {asked!r} is not served here; the server serves only "
                        f"{check.sole!r}: using it (/model switches)."
                    )
                ]
            )
        self._model_answers(not check.problem)
        return check.problem

    async def warmup(self) -> str:
        try:
            await self._agent.warmup()
        except ModelError as exc:
            self._model_answers(False)
            return self._server.describe(exc)
        self._model_answers(True)
        return ""

    def _model_answers(self, answers: bool) -> None:
        """What this instance now knows of its model server: relayed messages that waited
        for it may run, and a pong tells the senders (zcoder's ``model_state``)."""
        if answers:
            self._inbox.model_answered()
        self._relay.model_available(answers)

    # -- relayed turns --------------------------------------------------------------------

    def relay_runnable(self) -> bool:
        """A relayed message may be claimed now (a query: it changes nothing)."""
        return self._inbox.runnable()

    def relay_waits_for_model(self) -> bool:
        return self._inbox.waits_for_model()

    def claim_relay(self) -> RelayTurn | None:
        """Claim the oldest runnable relayed message (showing the quarantine reports); the
        turn to run it, or ``None`` when another claimer was faster or the claim failed."""
        claimed, shown = self._inbox.claim()
        self._say(shown)
        if claimed is None:
            return None
        return RelayTurn(claimed.envelope.sender_project, functools.partial(self._run, claimed))

    async def run_relay_turn(self) -> bool:
        """Claim and run one relayed message; ``False`` when none could be claimed."""
        turn = self.claim_relay()
        return turn is not None and await turn.run()

    async def _run(self, claimed: Claimed) -> bool:
        """Run a claimed message. It is settled (at most once) when its turn reached the
        model, whatever the outcome; when it never did (server unreachable, model missing),
        nothing of it ran: it goes back first in the queue and waits for the model."""
        self._changes.start()
        ended = False
        try:
            request = TurnRequest("relay", *_sender(claimed))
            outcome = await self._agent.run_turn(request, on_reach=self._reached)
            self._say(self._ended(outcome))
            ended = True
            _log.debug("relayed turn %s ended: %s", claimed.envelope.message_id, outcome.status)
        finally:
            if not ended:  # an error of ours, or the whole app is going
                self._say(self._inbox.abandoned())
        return True

    def _reached(self) -> None:
        # Only a turn that reached the model has started the message.
        self._relay.model_available(True)
        self._say(self._inbox.reached())

    def _ended(self, outcome: TurnOutcome) -> list[Say]:
        if outcome.status == "error" and not outcome.reached_model:
            self._relay.model_available(False)
            return self._inbox.unreached()
        state, detail = final_state(outcome)
        return self._inbox.finished(state, detail, self._changes.changed(self._agent.turn_changes))

    def stop_relay(self) -> str:
        """Escape stopped a relayed turn: the notice to show after it, or ``""`` when no
        relayed message waits (nothing to stop)."""
        waiting = self._inbox.stop()
        return stopped_notice(waiting) if waiting else ""

    def relay_stopped(self) -> bool:
        return self._inbox.stopped

    def relay_control(self, action: str) -> list[str]:
        """``/agents ACTION`` as the worker runs it (what may run changes); the lines."""
        # The news first, and said even when the action is then refused: a sync's notices
        # (the one "relay unavailable" line, a held message) are not told twice.
        self._say(self._inbox.sync())
        lines, shown = self._inbox.change(action)
        self._say(shown)
        return lines

    # -- the relay's changes --------------------------------------------------------------

    async def wait_relay_change(self) -> None:
        """Return once the relay changed (the worker then calls ``sync_relay``)."""
        await self._relay.wait_for_change()

    def sync_relay(self) -> None:
        """Take in what changed: the relay tools while the relay is available, the new
        messages (held ones are told), the relay's problem lines, the receipts that
        arrived for what this instance sent."""
        self._on_tools(self._tools if self._relay.available else [])
        self._say(self._inbox.relay_changed())
        self.show_entries()

    def show_entries(self) -> None:
        """The sent list's new entries (receipts, withdrawals): kept and shown."""
        for event in self._inbox.sent_entries():
            self._agent.session.events.append(event)  # a receipt is part of the session
            self._show(event)

    def _say(self, lines: Sequence[Say]) -> None:
        for line in lines:
            self._show(TranscriptEvent(role=line.role, text=line.text))

    def _show(self, event: TranscriptEvent) -> None:
        self._sink.emit(Entry(event))


def _sender(claimed: Claimed) -> tuple[str, RelaySender]:
    e = claimed.envelope
    sender = RelaySender(
        instance_id=e.sender_instance_id,
        pid=e.sender_pid,
        project=e.sender_project,
        workspace=e.sender_workspace,
        verified=claimed.verified,
        hops=e.hops,
    )
    return e.body, sender
