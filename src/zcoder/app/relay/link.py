"""The app's side of the relay: the service in the root nursery, claims for the worker, the
tools' handle, the status line and ``/agents``.

``RelayLink`` is the one object through which the app uses the relay: it starts
``RelayService`` (lifecycle and manifest, unless ``ZCODER_RELAY=off`` or a relay setting is
invalid) and translates it and its ``health`` for the app; no other app module reaches the
service. Only the foreground claims: one message at a time, and never while paused
(accepted messages wait and run in FIFO order after ``resume``).
Nothing here runs for the listener: the spool and the service note each change in the
relay's one ``Changes``, the worker awaits it (``wait_for_change``) and then calls ``sync``,
which offers the relay tools through ``on_tools`` (both while the relay is available, none
otherwise). This object is also the tools' ``RelayHandle`` (``discover``, ``deliver``) and
names send targets (``label``, ``card_label``; ``relay_labels.SendLabels`` asks with them).
What ``/agents`` shows is ``control``'s ``AgentsView``; the words are ``ui/agents_text.py``.

Faults: ``sync`` returns each line to show the user, once: the relay's failure after its
start (``Relay unavailable: <reason>``), quarantined spool entries, storage faults. Every
spool call of the foreground goes through ``_spool_call``, the one place that turns a
failure into ``health.fail``/``health.spool_fault``: no spool fault reaches the app. After a
failure that did not damage the spool, the messages already accepted still run.

Longer than 400 lines on purpose: it is the one object through which the app reaches the
relay (``tests/app/test_relay_one_object.py``), so the service's and the spool's every use
by the app is here; what it decides is ``Inbound``'s, what it says is ``ui/agents_text``'s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import attrs
import trio

from zcoder.app.relay.labels import TargetNames
from zcoder.app.relay.outbox import RelayOutbox
from zcoder.app.relay.receipts import ReceiptSender
from zcoder.config import Config
from zcoder.errors import CommandError, RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack
from zcoder.relay.inbound import (
    INBOX_ACTIONS,
    Effect,
    Inbound,
    PutBack,
    Settle,
    Tell,
    sender_label,
)
from zcoder.relay.listing import peer_table
from zcoder.relay.registry import Peer, receiver_gone
from zcoder.relay.service import RelayService
from zcoder.relay.spool.store import Arrived, Claimed, Spool, SpoolFault
from zcoder.text.visible import escape_controls
from zcoder.tools.base import Tool
from zcoder.tools.relay_tools import check_send, message_status_tool, relay_tools
from zcoder.ui.agents_text import (
    INBOX_HELP,
    OFF_REASON,
    RUNS_AGAIN,
    AgentsView,
    agents_lines,
    not_listed,
    unavailable_line,
)
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

__all__ = ["RelayLink"]

_T = TypeVar("_T")

_log = logging.getLogger(__name__)
_PROBLEM_PREFIX = "relay disabled: "  # how config.py words a bad relay setting


class RelayLink:
    """One instance's relay as the app uses it; ``start`` once, in the root nursery."""

    def __init__(
        self,
        config: Config,
        runtime_dir: Path | None,
        on_tools: Callable[[Sequence[Tool]], None],
    ) -> None:
        self._config = config
        self._on_tools = on_tools
        # Made whatever the settings: off, or unable to start, it says why and never runs
        # a listener, so this object needs no case for a relay that is not there.
        self.service = RelayService(
            settings=config.relay,
            settings_problem=config.relay_problem,
            runtime_dir=runtime_dir,
            env=os.environ,
            project=config.agent_name or config.workspace.name or str(config.workspace),
            workspace=config.workspace,
            profile=config.profile,
            model=config.model,
            session_id="",
        )
        self._off = _off_reason(config)
        self._names = TargetNames(config.workspace)
        # Every accepted message's state; the spool only stores them.
        self.inbound = Inbound(config.relay.inbound, max_hops=config.relay.max_hops)
        self._claimed_from: Spool | None = None  # settled there even if found damaged since
        self._unshown: list[Say] = []  # caused by news taken in for a query, shown next
        self._seen = 0  # the count of the service's changes at the last wake-up
        self._told = False  # the failure was shown
        # zcoder's extension: receipts to our senders, the outbox of what we sent.
        self.receipts = ReceiptSender(
            me=lambda: self.service.instance_id,
            relay_dir=lambda: self.service.health.relay_dir,
            io_timeout=config.relay.io_timeout,
            max_bytes=config.relay.max_bytes,
        )
        self.outbox = RelayOutbox(
            receipts=self.receipts,
            spool=lambda: self.service.spool,
        )
        self.service.set_extension(self.outbox.handle)
        self.outbox.notify = self.service.changes.note  # the relay's own primitive
        self._tools = [*relay_tools(self), message_status_tool(self._status_text)]

    # -- start ----------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery, *, model: str, session_id: str) -> str:
        """Start the service; ``""`` when it runs (or is off by configuration: already
        said), else why it is unavailable (one line, for one notice)."""
        service = self.service
        service.refresh(model=model, session_id=session_id)
        if self.off:  # already said where the settings are shown
            return ""
        nursery.start_soon(self.receipts.run)
        await nursery.start(service.run)
        self._on_tools(self._tools if self.available else [])
        return self.reason

    async def wait_for_change(self) -> None:
        """Return once the relay changed (depth, pause, availability, a fault) since the
        last return; at once if it already has. One waiter: the worker. For good when
        the relay is off (nothing changes)."""
        self._seen = await self.service.changes.wait(self._seen)

    def sync(self) -> list[Say]:
        """After a change: offer the relay tools exactly while the relay is available, and
        return the lines to show the user as errors, each once: the relay's failure after
        its start (``Relay unavailable: <reason>``), quarantined entries, storage faults."""
        self._on_tools(self._tools if self.available else [])
        service = self.service
        lines = [Say(line, "error") for line in service.health.take_problems()]
        if service.health.problem and not self._told:
            self._told = True
            lines.append(Say(unavailable_line(service.health.problem), "error"))
        self.inbound.changed()
        return lines + self._take_news()

    def _catch_up(self) -> None:
        """Tell the machine what entered and left the spool since the last look: O(1) per
        message, the spool's own log (never a read of the inbox). What that causes (a
        held message is told to its sender) happens now; its lines wait for the next
        ``_take_news``, so that a query returns no lines and loses none."""
        spool = self.service.spool
        if spool is None:
            return
        effects: list[Effect] = []
        for news in spool.take_news():
            if isinstance(news, Arrived):
                effects += self.inbound.arrived(news)
            else:
                self.inbound.left(news.message_id)
        self._unshown += self.perform(effects)

    def _take_news(self) -> list[Say]:
        """``_catch_up``, and every line it caused not yet shown."""
        self._catch_up()
        shown, self._unshown = self._unshown, []
        return shown

    def perform(self, effects: list[Effect]) -> list[Say]:
        """Carry out what the machine decided: receipts go out, spool operations are
        done; the lines to show are returned."""
        shown: list[Say] = []
        for effect in effects:
            if isinstance(effect, Tell):
                m = effect
                self.receipts.send(m.message, m.state, m.detail, m.changed)
            elif isinstance(effect, Settle):
                self._settle(effect.claimed)
            elif isinstance(effect, PutBack):
                shown += self.perform(self.inbound.put_back(self._put_back(effect.claimed)))
            else:
                shown.append(said(effect))
        return shown

    def _spool_call(self, action: str, call: Callable[[], _T]) -> _T | None:
        """Run one spool operation; its result, or ``None`` if it failed, which is handed
        to the service here and nowhere else: a ``SpoolFault`` as classified (damage makes
        the relay fail, a storage fault is a line), anything unexpected as a failure of the
        relay. Never raises but what is not an ``Exception`` (``trio.Cancelled``)."""
        try:
            return call()
        except SpoolFault as fault:
            self.service.health.spool_fault(fault)
        except Exception as exc:
            _log.exception("relay spool %s failed", action)
            self.service.health.fail(f"the relay spool failed to {action}: {exc}")
        return None

    # -- state ----------------------------------------------------------------------------

    @property
    def off(self) -> bool:
        return self._config.relay.mode == "off" or bool(self._config.relay_problem)

    @property
    def available(self) -> bool:
        return self.service.status().available

    @property
    def reason(self) -> str:
        """Why the relay is not running (``""`` while it is)."""
        return self._off or self.service.status().reason

    def status(self) -> tuple[str, int]:
        """``(state, waiting)``: ``on``/``paused``/``off``/``unavailable`` and the accepted
        messages not yet started."""
        if self.off:
            return "off", 0
        status = self.service.status()
        waiting = max(status.queued - (self.inbound.running is not None), 0)
        if not status.available:
            return "unavailable", waiting
        return ("paused" if status.paused else "on"), waiting

    def runnable(self) -> bool:
        """A message may be claimed now: the machine has one (``Inbound.runnable``) and
        the spool is there and not paused (also after a failure of the relay that left
        the spool intact)."""
        self._catch_up()
        spool = self._spool()
        return spool is not None and not spool.paused and self.inbound.runnable()

    def refresh(self, **fields: str) -> None:
        self.service.refresh(**fields)

    def model_available(self, available: bool) -> None:
        """Whether this instance's model server answers, as its pongs tell senders."""
        self.service.set_model_available(available)

    @property
    def config(self) -> Config:
        return self._config

    # -- the worker's claims --------------------------------------------------------------

    def claim(self) -> tuple[Claimed | None, list[Say]]:
        """Claim the oldest message the machine lets run (the held ones are skipped), and
        the lines to show (quarantine reports). A claim that fails makes the relay fail
        and ends the claims: retrying would only fail again."""
        shown = self._take_news()  # a message stored since the last sync is decided first
        spool = self._spool()
        if spool is None or spool.paused or not self.inbound.runnable():
            return None, shown

        def claim() -> Claimed | None:
            try:
                return spool.claim(self.inbound.skip())
            except SpoolFault as fault:
                raise SpoolFault(str(fault), damaged=True) from None

        claimed = self._spool_call("claim a message", claim)
        self._claimed_from = spool if claimed is not None else None
        shown += self._take_news()  # what the claim found gone or quarantined
        self.inbound.claimed(claimed)
        if claimed is not None:  # a reply's question can name its target
            self._names.remember_sender(claimed.envelope)
        return claimed, shown + [Say(p, "error") for p in spool.take_problems()]

    def _settle(self, claimed: Claimed) -> None:
        """Settle the message (at most once), in the spool it was claimed from (also one
        found damaged meanwhile). A receipt that cannot be written (it is settled all
        the same) is a problem the next ``sync`` returns."""
        spool, self._claimed_from = self._claimed_from, None
        if spool is not None:
            self._spool_call("settle a message", lambda: spool.complete(claimed))

    def _put_back(self, claimed: Claimed) -> str:
        """Put back, first in the queue, a message whose turn never reached the model;
        ``""``, or why it could not be put back (the machine then settles it)."""
        spool = self._spool()
        try:
            if spool is not None:
                spool.unclaim(claimed)
        except (RelayError, OSError) as exc:
            _log.warning("relay: %s", exc)
            return str(exc)
        self._claimed_from = None
        return ""

    def _remove(self, message_id: str) -> bool:
        """Settle a waiting message without running it (a held message the user denied):
        claimed and settled at once, so a retry of it stays a duplicate. ``False`` when it
        no longer waits (it ran, or it is gone) or the spool refused (a fault, handed on).
        Also while a relayed turn runs: the claim skips every other message, the running
        one (already in ``processing/``) included."""
        spool = self._spool()
        if spool is None:
            return False

        def take() -> bool:
            claimed = spool.claim(_AllBut(message_id))
            if claimed is not None:
                spool.complete(claimed)
            return claimed is not None

        return bool(self._spool_call("remove a message", take))  # the spool notes it

    def unrun(self) -> list[Unrun]:
        """What leaving stops or drops: the running message, then the waiting ones, oldest
        first."""
        self._catch_up()
        running = self.inbound.running
        first = [running.envelope] if running is not None else []
        return [
            Unrun(e.message_id, sender_label(e), e.body, running=n < len(first))
            for n, e in enumerate([*first, *self.inbound.unrun()])
        ]

    def question_asked(self, reason: str) -> None:
        """The running relayed turn asks this instance's user: its sender is told
        ``waiting`` (``Inbound.asking``; ``asking.ExpiringQuestions`` calls this)."""
        self.perform(self.inbound.asking(reason))

    def question_answered(self, detail: str, *, expired: bool) -> None:
        """The question was answered or expired: ``started`` again (``Inbound.answered``)."""
        self.perform(self.inbound.answered(detail, expired=expired))

    def unattended(self) -> bool:
        """A question of the running relayed turn expired (``Inbound.unattended``)."""
        return self.inbound.unattended

    def farewell(self) -> None:
        """On the way out: tell the sender of the running message ``cancelled`` and those
        of the waiting ones ``dropped`` (``Inbound.farewell``)."""
        self._catch_up()
        self.perform(self.inbound.farewell())

    def _spool(self) -> Spool | None:
        """The spool to claim from (``RelayService.spool``), else ``None``."""
        return self.service.spool

    def close_intake(self) -> None:
        """On the way out, first: accept no more messages (the listener answers
        ``paused``) and claim none (a claim needs an unpaused spool). Never raises: a
        ``state`` file that cannot be written is a fault of the relay's, the switch holds
        in memory."""
        self.service.pause()

    def sending_from(self) -> tuple[str, Path]:
        """This instance's id and the checked relay directory, to send from;
        ``RelayUnavailable`` while the relay is not running."""
        if not self.available:
            raise RelayUnavailable(f"the relay is not running in this instance: {self.reason}")
        return self.service.instance_id, self.service.health.check_dir()

    # -- /agents and /list-agents ---------------------------------------------------------

    def control(self, action: str) -> tuple[list[str], list[Say]]:
        """``/agents [ACTION]``: ``""`` reports, ``pause``/``resume`` switch the relay (a
        resume also ends an Escape stop), ``hold``/``accept``/``inbox``/``approve N``/
        ``deny N`` are the inbound policy's. The lines to show, and the notices the action
        caused; ``ZcoderError`` for a bad action or a switch while the relay is not running."""
        verb, _, arg = action.partition(" ")
        arg = arg.strip()
        if verb in INBOX_ACTIONS:
            return self._inbox_control(verb, arg)
        if action not in ("", "pause", "resume"):
            raise CommandError(
                f"unknown /agents action {action!r}: use pause, resume, hold, accept, inbox, "
                "show N, approve N, deny N, sent or cancel ID"
            )
        shown = self._take_news()
        if action == "resume" and self.inbound.go_on() and self.status()[0] != "paused":
            return [RUNS_AGAIN], shown  # only stopped: nothing to switch in the relay
        if action and not self.available:
            raise RelayUnavailable(f"the relay is not running in this instance: {self.reason}")
        if action == "pause":
            self.service.pause()
        if action == "resume":
            self.service.resume()
        lines = agents_lines(action, self._view())
        return ([*lines, *INBOX_HELP] if not action and len(lines) > 1 else lines), shown

    def _inbox_control(self, verb: str, arg: str) -> tuple[list[str], list[Say]]:
        if verb in ("hold", "accept") and arg:
            raise CommandError(f"/agents {verb} takes no argument")
        shown = self._take_news()
        if verb in ("inbox", "show") and (arg or verb == "show"):  # inbox N reads N too
            return shown_lines(self.inbound.show(arg)), shown
        effects: list[Effect] = []
        if verb == "inbox":
            return inbox_lines(self.inbound.inbox()), shown
        if verb in ("hold", "accept"):
            mode, effects = self.inbound.set_mode(verb)
            lines = [mode_line(mode)]
        elif verb == "approve":
            lines = [approved_line(self.inbound.approve(arg))]
        else:
            removal = self.inbound.deny(arg)
            if not self._remove(removal.message_id):
                number = self.inbound.number(removal.message_id)
                raise CommandError(
                    f"relayed message {number} could not be removed: it no longer waits"
                )
            denied, effects = self.inbound.removed(removal.message_id)
            lines = [denied_line(denied)]
        return lines, shown + self.perform(effects)

    def _view(self) -> AgentsView:
        state, waiting = self.status()
        service = self.service
        if state in ("off", "unavailable"):
            return AgentsView(state, self.reason, bad_setting=bool(self._config.relay_problem))
        return AgentsView(
            state,
            instance_id=service.status().instance_id,
            pid=os.getpid(),
            relay_dir=service.health.relay_dir,
            waiting=waiting,
            running=self.inbound.running is not None,
        )

    async def list_lines(self) -> list[str]:
        """``/list-agents``: the peer table's lines, or one line (a notice): the no-peers
        sentence, or that the relay is off here by configuration and why. ``ZcoderError``
        when the relay should run but cannot."""
        if self.off:
            return [not_listed(self.reason)]
        try:
            peers = await self.discover()
        except RelayError as exc:
            raise RelayUnavailable(f"/list-agents: the relay is unavailable: {exc}") from None
        return peer_table(peers).splitlines()

    async def check_send(self, target: str, message: str) -> None:
        """Before a send's question: ``ToolError`` (the tool's own refusal) unless a fresh
        ping finds ``target`` live and the message may be sent. Refreshes what ``label``
        knows, the target's state included."""
        await check_send(self, target, message)

    # -- the tools' handle ----------------------------------------------------------------

    def _status_text(self, message_id: str) -> str | None:
        """What ``agent_message_status`` reads: ``gone`` for a receiver that left (when the
        relay runs: without it the directory is not checked)."""
        try:
            _, relay_dir = self.sending_from()
        except RelayError:
            return self.outbox.status_text(message_id)
        return self.outbox.status_text(message_id, receiver_gone(relay_dir))

    @property
    def max_message_chars(self) -> int:
        return self._config.relay.max_message_chars

    async def discover(self) -> list[Peer]:
        if self.off:
            raise RelayUnavailable(self.reason)
        peers = await self.service.discover()
        self._names.remember_peers(peers)
        return peers

    def known_peers(self) -> list[Peer]:
        """What the last discovery found (no I/O: Tab completes from it)."""
        return self._names.peers()

    async def deliver(self, peer: Peer, message: str, hops: int = 0) -> Ack:
        if self.off:
            raise RelayUnavailable(self.reason)
        self.service.health.check_dir()  # nothing is sent from a directory that became unsafe
        try:
            envelope = self.service.new_envelope(peer.manifest.instance_id, message, hops)
        except ValueError as exc:
            raise RelayError(f"the message cannot be sent: {exc}") from None
        settings = self._config.relay
        ack = await client.send(
            Path(peer.manifest.socket),
            envelope,
            io_timeout=settings.io_timeout,
            max_bytes=settings.max_bytes,
        )
        if ack.status == "accepted":
            self.inbound.sent_to(peer.manifest.instance_id)
        m = peer.manifest
        self.outbox.record(envelope, ack, f"{escape_controls(m.project)} (pid {m.pid})")
        return ack

    def sent_number(self, message_id: str) -> int | None:
        """A stored message's number in ``/agents sent`` (``RelayHandle.sent_number``)."""
        sent = self.outbox.outbox.get(message_id)
        return None if sent is None else sent.number

    def label(self, instance_id: str) -> str:
        """How a send question names its target (``TargetNames.label``)."""
        return self._names.label(instance_id)

    def checkout_note(self, instance_id: str) -> str:
        """A warning when the target works in this instance's git checkout (``""``)."""
        return self._names.checkout_note(instance_id)

    def card_label(self, instance_id: str) -> str:
        """How a send's tool card names its target (``TargetNames.card_label``)."""
        return self._names.card_label(instance_id)


@attrs.frozen
class _AllBut:
    """Every message id but one: what a claim of exactly that message skips."""

    message_id: str

    def __contains__(self, item: object) -> bool:
        return item != self.message_id


def _off_reason(config: Config) -> str:
    """Why the relay is off by configuration (``""`` when it is not): ``ZCODER_RELAY=off``
    and an invalid relay setting are told apart."""
    if config.relay_problem:
        problem = config.relay_problem.removeprefix(_PROBLEM_PREFIX)
        return f"an invalid setting switched it off: {problem}"
    return OFF_REASON if config.relay.mode == "off" else ""
