"""The worker's side of the inbound machine: the one feeder of ``Inbound``.

``RelayInbox`` owns the machine (``zcoder.relay.inbound.Inbound``) and is called only from
the worker's task: ``sync`` after every change of the relay feeds it the news (arrived,
left, withdrawn by their sender), the sends a receiver accepted and the receipts taken for
our own messages; ``claim`` and the turn's transitions (``reached``, ``question_asked``,
``question_answered``, ``finished``, ``abandoned``, ``unreached``) feed it what became of
the relayed turn (its questions are asked in the turn, in the worker's task too);
``change`` runs the ``/agents`` actions that change what may run. Each transition's
effects are carried out by the link (``RelayLink.perform``), which calls nothing of the
machine; a spool operation whose answer the machine needs (putting a message back,
removing a denied one) is done here, between the two calls.

Queries change nothing: ``runnable``, ``status``, ``unrun`` and ``query`` (``/agents``,
``/agents inbox``, ``/agents show N``) read the machine and the relay as they are.
"""

from __future__ import annotations

from zcoder.app.relay.link import RelayLink
from zcoder.app.relay.sends import Sends
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError
from zcoder.relay.inbound import INBOX_ACTIONS, Effect, Inbound, sender_label
from zcoder.relay.spool.store import Arrived, Claimed, Refused, Withdrawn
from zcoder.ui.agents_text import INBOX_HELP, RUNS_AGAIN, agents_lines, refused_line
from zcoder.ui.backend import Unrun
from zcoder.ui.inbound_text import (
    Say,
    approved_line,
    denied_line,
    inbox_lines,
    mode_line,
    said,
    shown_lines,
)

__all__ = ["RelayInbox"]

_USAGE = (
    "unknown /agents action {action!r}: use pause, resume, hold, accept, inbox, show N, "
    "approve N, deny N, sent or cancel ID"
)


class RelayInbox:
    """The accepted relayed messages as the worker runs them."""

    def __init__(self, link: RelayLink, sends: Sends) -> None:
        self._link = link
        self._sends = sends
        relay = link.config.relay
        self.inbound = Inbound(relay.inbound, max_hops=relay.max_hops)

    # -- the worker's sync ----------------------------------------------------------------

    def relay_changed(self) -> list[Say]:
        """The relay changed (the worker's sync after ``RelayLink.wait_for_change``): a
        claim that found nothing may be tried again; then ``sync``. Only here: a claim
        syncs first, and that must not undo what the last claim found."""
        self.inbound.changed()
        return self.sync()

    def sync(self) -> list[Say]:
        """Feed the machine what happened since the last look and carry out what that
        causes; the lines to show: the relay's problems, then the notices."""
        self._note_answers()
        inbound = self.inbound
        effects: list[Effect] = []
        refused: list[Say] = []
        for news in self._link.take_news():
            if isinstance(news, Refused):
                if not self._link.closing:
                    refused.append(Say(refused_line(sender_label(news.envelope))))
            elif isinstance(news, Arrived):
                effects += inbound.arrived(news)
            elif isinstance(news, Withdrawn):
                effects += inbound.withdrawn(news.message_id)
            else:
                inbound.left(news.message_id)
        for receipt in self._link.take_receipts():
            self._sends.outbox.receipt(receipt)
        problems = [Say(line, "error") for line in self._link.take_problems()]
        return problems + refused + self._perform(effects)

    def _note_answers(self) -> None:
        """The receivers that accepted a message of ours: a reply in a relayed turn is a
        round trip with its sender."""
        accepted, self._sends.accepted = self._sends.accepted, []
        for peer in accepted:
            self.inbound.sent_to(peer)

    def sent_entries(self) -> list[TranscriptEvent]:
        """The sent list's transcript entries made since the last call (receipts taken by
        ``sync``, withdrawals of ``/agents cancel``)."""
        return self._sends.outbox.take_entries()

    def _perform(self, effects: list[Effect]) -> list[Say]:
        return [said(notice) for notice in self._link.perform(effects)]

    # -- queries --------------------------------------------------------------------------

    def runnable(self) -> bool:
        """A message may be claimed now: the machine has one and the spool is there and
        not paused."""
        return self._link.claimable() and self.inbound.runnable()

    def waits_for_model(self) -> bool:
        return self.inbound.waits_for_model()

    @property
    def stopped(self) -> bool:
        return self.inbound.stopped

    def status(self) -> tuple[str, int]:
        """``(state, waiting)`` of the relay (``RelayLink.status``)."""
        return self._link.status(self.inbound.running is not None)

    def unrun(self) -> list[Unrun]:
        """What leaving stops or drops: the running message, then the waiting ones, oldest
        first."""
        running = self.inbound.running
        first = [running.envelope] if running is not None else []
        return [
            Unrun(e.message_id, sender_label(e), e.body, running=n < len(first))
            for n, e in enumerate([*first, *self.inbound.unrun()])
        ]

    def query(self, action: str) -> list[str]:
        """``/agents``, ``/agents inbox`` and ``/agents show N`` (``inbox N``): the lines."""
        verb, _, arg = action.partition(" ")
        arg = arg.strip()
        if verb in ("inbox", "show") and (arg or verb == "show"):
            return shown_lines(self.inbound.show(arg))
        if verb == "inbox":
            return inbox_lines(self.inbound.inbox())
        lines = agents_lines("", self._link.view(self.inbound.running is not None))
        return [*lines, *INBOX_HELP] if len(lines) > 1 else lines

    # -- a relayed turn -------------------------------------------------------------------

    def claim(self) -> tuple[Claimed | None, list[Say]]:
        """Claim the oldest message the machine lets run (the held ones are skipped), and
        the lines to show."""
        shown = self.sync()  # a message stored since the last sync is decided first
        if not self.runnable():
            return None, shown
        claimed = self._link.claim(self.inbound.skip())
        self.inbound.claimed(claimed)
        if claimed is not None:  # a reply's question can name its target
            self._sends.remember_sender(claimed.envelope)
        return claimed, shown + self.sync()  # what the claim found gone or quarantined

    def reached(self) -> list[Say]:
        return self._perform(self.inbound.reached())

    def finished(self, state: str, detail: str, changed: str) -> list[Say]:
        self._note_answers()
        return self._perform(self.inbound.finished(state, detail, changed))

    def abandoned(self) -> list[Say]:
        return self._perform(self.inbound.abandoned())

    def question_asked(self, reason: str) -> None:
        """The running relayed turn asks this instance's user: its sender is told
        ``waiting`` (``Inbound.asking``; ``asking.ExpiringQuestions`` calls this)."""
        self._perform(self.inbound.asking(reason))

    def question_answered(self, detail: str, *, expired: bool) -> None:
        """The question was answered or expired: ``started`` again (``Inbound.answered``)."""
        self._perform(self.inbound.answered(detail, expired=expired))

    def unattended(self) -> bool:
        """A question of the running relayed turn expired (``Inbound.unattended``)."""
        return self.inbound.unattended

    def unreached(self) -> list[Say]:
        """Nothing of the turn ran: the message goes back first in the spool's queue."""
        put_back = self.inbound.unreached()
        problem = self._link.unclaim(put_back.claimed)
        return self._perform(self.inbound.put_back(problem))

    # -- the user -------------------------------------------------------------------------

    def local_turn(self) -> None:
        self.inbound.local_turn()

    def model_answered(self) -> None:
        self.inbound.model_answered()

    def stop(self) -> int:
        """Escape stopped a relayed turn (``Inbound.stop``): how many wait."""
        return self.inbound.stop()

    def change(self, action: str) -> tuple[list[str], list[Say]]:
        """``/agents pause|resume|hold|accept|approve N|deny N`` (a resume also ends an
        Escape stop), once the caller has taken in the news (``sync``: the numbers and the
        queries read after it): the lines to show, and the notices the action caused;
        ``ZcoderError`` for a bad action or a switch while the relay is not running."""
        verb, _, arg = action.partition(" ")
        arg = arg.strip()
        if verb in INBOX_ACTIONS:
            lines, effects = self._inbox_change(verb, arg)
            return lines, self._perform(effects)
        if action not in ("", "pause", "resume"):
            raise CommandError(_USAGE.format(action=action))
        if not action:
            return self.query(""), []
        if action == "resume" and self.inbound.go_on() and self.status()[0] != "paused":
            return [RUNS_AGAIN], []  # only stopped: nothing to switch in the relay
        self._link.switch(action)
        return agents_lines(action, self._link.view(self.inbound.running is not None)), []

    def _inbox_change(self, verb: str, arg: str) -> tuple[list[str], list[Effect]]:
        if verb in ("hold", "accept") and arg:
            raise CommandError(f"/agents {verb} takes no argument")
        if verb in ("inbox", "show"):
            return self.query(f"{verb} {arg}".strip()), []
        effects: list[Effect] = []
        if verb in ("hold", "accept"):
            mode, effects = self.inbound.set_mode(verb)
            lines = [mode_line(mode)]
        elif verb == "approve":
            lines = [approved_line(self.inbound.approve(arg))]
        else:
            removal = self.inbound.deny(arg)
            if not self._link.remove(removal.message_id):
                number = self.inbound.number(removal.message_id)
                raise CommandError(
                    f"relayed message {number} could not be removed: it no longer waits"
                )
            denied, effects = self.inbound.removed(removal.message_id)
            lines = [denied_line(denied)]
        return lines, effects

    def farewell(self) -> None:
        """On the way out (after the worker's last sync): ``cancelled`` to the sender of
        the running message and ``dropped`` to those of the waiting ones."""
        self._perform(self.inbound.farewell())
