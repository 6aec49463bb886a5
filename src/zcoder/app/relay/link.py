"""The app's edge of the relay: the one object that reaches the relay service and its spool.

``RelayLink`` starts ``RelayService`` (lifecycle and manifest, unless ``ZCODER_RELAY=off``
or a relay setting is invalid), answers what the relay is (``status``, ``view``), hands
over what happened since the last look (``take_news``, ``take_receipts``,
``take_problems``), does the spool operations one at a time (``claim``, ``settle``,
``unclaim``, ``remove``), carries out the inbound machine's receipts and spool operations
(``perform``), and sends (``discover``, ``send``). It decides nothing and feeds nothing:
what runs is ``zcoder.relay.inbound.Inbound``'s, fed by the worker's ``RelayInbox``
(``app/relay/inbox.py``); what this instance sent is ``Sends`` (``app/relay/sends.py``).

Nothing here runs for the listener: receipts and cancels are answered in the relay package
(``relay/extension.py``), and the spool and the service note each change in the relay's
one ``Changes``, which the worker awaits (``wait_for_change``).

Faults: every spool call goes through ``_spool_call``, the one place that turns a failure
into ``health.fail``/``health.spool_fault``: no spool fault reaches the app. After a
failure that did not damage the spool, the messages already accepted still run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import attrs
import trio

from zcoder.app.relay.receipts import ReceiptSender
from zcoder.config import Config
from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack, Enqueue, Receipt
from zcoder.relay.inbound import Effect, Notice, Settle, Tell
from zcoder.relay.registry import Peer
from zcoder.relay.service import RelayService
from zcoder.relay.spool.store import Claimed, News, Spool, SpoolFault
from zcoder.ui.agents_text import OFF_REASON, AgentsView, unavailable_line

__all__ = ["RelayLink"]

_T = TypeVar("_T")

_log = logging.getLogger(__name__)
_PROBLEM_PREFIX = "relay disabled: "  # how config.py words a bad relay setting


class RelayLink:
    """One instance's relay as the app reaches it; ``start`` once, in the root nursery."""

    def __init__(self, config: Config, runtime_dir: Path | None) -> None:
        self.config = config
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
            extension=True,  # receipts to our senders: ``receipts`` below
        )
        self._off = _off_reason(config)
        self._claimed_from: Spool | None = None  # settled there even if found damaged since
        self._seen = 0  # the count of the service's changes at the last wake-up
        self.closing = False  # ``close_intake`` ran: the app is leaving
        self._told = False  # the failure was shown
        # zcoder's extension: receipts to our senders.
        self.receipts = ReceiptSender(
            me=lambda: self.service.instance_id,
            relay_dir=lambda: self.service.health.relay_dir,
            io_timeout=config.relay.io_timeout,
            max_bytes=config.relay.max_bytes,
        )

    # -- start and changes ----------------------------------------------------------------

    async def start(self, nursery: trio.Nursery, *, model: str, session_id: str) -> str:
        """Start the service; ``""`` when it runs (or is off by configuration: already
        said), else why it is unavailable (one line, for one notice)."""
        self.service.refresh(model=model, session_id=session_id)
        if self.off:  # already said where the settings are shown
            return ""
        nursery.start_soon(self.receipts.run)
        await nursery.start(self.service.run)
        return self.reason

    async def wait_for_change(self) -> None:
        """Return once the relay changed (depth, pause, availability, a fault, a receipt)
        since the last return; at once if it already has. One waiter: the worker. For
        good when the relay is off (nothing changes)."""
        self._seen = await self.service.changes.wait(self._seen)

    def wake(self) -> None:
        """Wake ``wait_for_change``: the app found news of its own (a receiver gone)."""
        self.service.changes.note()

    def take_news(self) -> list[News]:
        """What entered and left the spool since the last call (the spool's own log: O(1)
        per message, never a read of the inbox)."""
        spool = self.service.spool
        return [] if spool is None else spool.take_news()

    def take_receipts(self) -> list[Receipt]:
        """The receipts the listener took for messages this instance sent."""
        return self.service.intake.take_receipts()

    def take_problems(self) -> list[str]:
        """The lines to show as errors, each once: the relay's failure after its start
        (``Relay unavailable: <reason>``), quarantined entries, storage faults."""
        health = self.service.health
        lines = health.take_problems()
        if health.problem and not self._told:
            self._told = True
            lines.append(unavailable_line(health.problem))
        spool = self.service.spool
        return lines + (spool.take_problems() if spool is not None else [])

    # -- state ----------------------------------------------------------------------------

    @property
    def off(self) -> bool:
        return self.config.relay.mode == "off" or bool(self.config.relay_problem)

    @property
    def available(self) -> bool:
        return self.service.status().available

    @property
    def reason(self) -> str:
        """Why the relay is not running (``""`` while it is)."""
        return self._off or self.service.status().reason

    def status(self, running: bool) -> tuple[str, int]:
        """``(state, waiting)``: ``on``/``paused``/``off``/``unavailable`` and the accepted
        messages not yet started (``running``: one of them runs now)."""
        if self.off:
            return "off", 0
        status = self.service.status()
        waiting = max(status.queued - running, 0)
        if not status.available:
            return "unavailable", waiting
        return ("paused" if status.paused else "on"), waiting

    def view(self, running: bool) -> AgentsView:
        """What ``/agents`` shows of the relay."""
        state, waiting = self.status(running)
        if state in ("off", "unavailable"):
            return AgentsView(state, self.reason, bad_setting=bool(self.config.relay_problem))
        service = self.service
        return AgentsView(
            state,
            instance_id=service.status().instance_id,
            pid=os.getpid(),
            relay_dir=service.health.relay_dir,
            waiting=waiting,
            running=running,
        )

    def claimable(self) -> bool:
        """The spool is there and not paused (also after a failure of the relay that left
        the spool intact): a claim may find a message."""
        spool = self.service.spool
        return spool is not None and not spool.paused

    def refresh(self, **fields: str) -> None:
        self.service.refresh(**fields)

    def model_available(self, available: bool) -> None:
        """Whether this instance's model server answers, as its pongs tell senders."""
        self.service.set_model_available(available)

    # -- switches -------------------------------------------------------------------------

    def close_intake(self) -> None:
        """On the way out, first: accept no more messages (the listener answers
        ``paused``) and claim none (a claim needs an unpaused spool). Never raises: a
        ``state`` file that cannot be written is a fault of the relay's, the switch holds
        in memory."""
        self.closing = True  # a refusal now is the exit's, not the user's pause
        self.service.pause()

    def switch(self, action: str) -> None:
        """``/agents pause`` or ``resume``; ``RelayUnavailable`` while it is not running."""
        if not self.available:
            raise RelayUnavailable(f"the relay is not running in this instance: {self.reason}")
        if action == "pause":
            self.service.pause()
        else:
            self.service.resume()

    # -- the spool ------------------------------------------------------------------------

    def claim(self, skip: frozenset[str]) -> Claimed | None:
        """Claim the oldest message not in ``skip``. A claim that fails makes the relay
        fail and ends the claims: retrying would only fail again."""
        spool = self.service.spool
        if spool is None or spool.paused:
            return None

        def claim() -> Claimed | None:
            try:
                return spool.claim(skip)
            except SpoolFault as fault:
                raise SpoolFault(str(fault), damaged=True) from None

        claimed = self._spool_call("claim a message", claim)
        self._claimed_from = spool if claimed is not None else None
        return claimed

    def unclaim(self, claimed: Claimed) -> str:
        """Put back, first in the queue, a message whose turn never reached the model;
        ``""``, or why it could not be put back (the machine then settles it)."""
        spool = self.service.spool
        try:
            if spool is not None:
                spool.unclaim(claimed)
        except (RelayError, OSError) as exc:
            _log.warning("relay: %s", exc)
            return str(exc)
        self._claimed_from = None
        return ""

    def remove(self, message_id: str) -> bool:
        """Settle a waiting message without running it (a held message the user denied):
        claimed and settled at once, so a retry of it stays a duplicate. ``False`` when it
        no longer waits (it ran, or it is gone) or the spool refused (a fault, handed on).
        Also while a relayed turn runs: the claim skips every other message, the running
        one (already in ``processing/``) included."""
        spool = self.service.spool
        if spool is None:
            return False

        def take() -> bool:
            claimed = spool.claim(_AllBut(message_id))
            if claimed is not None:
                spool.complete(claimed)
            return claimed is not None

        return bool(self._spool_call("remove a message", take))  # the spool notes it

    def perform(self, effects: list[Effect]) -> list[Notice]:
        """Carry out what the machine decided: receipts go out, claimed messages are
        settled; the notices are returned, to be shown. Calls nothing of the machine."""
        notices: list[Notice] = []
        for effect in effects:
            if isinstance(effect, Tell):
                m = effect
                self.receipts.send(m.message, m.state, m.detail, m.changed)
            elif isinstance(effect, Settle):
                self._settle(effect.claimed)
            else:
                notices.append(effect)
        return notices

    def _settle(self, claimed: Claimed) -> None:
        """Settle the message (at most once), in the spool it was claimed from (also one
        found damaged meanwhile). A receipt that cannot be written (it is settled all
        the same) is a problem ``take_problems`` returns."""
        spool, self._claimed_from = self._claimed_from, None
        if spool is not None:
            self._spool_call("settle a message", lambda: spool.complete(claimed))

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

    # -- sending --------------------------------------------------------------------------

    def sending_from(self) -> tuple[str, Path]:
        """This instance's id and the checked relay directory, to send from;
        ``RelayUnavailable`` while the relay is not running."""
        if not self.available:
            raise RelayUnavailable(f"the relay is not running in this instance: {self.reason}")
        return self.service.instance_id, self.service.health.check_dir()

    async def discover(self) -> list[Peer]:
        if self.off:
            raise RelayUnavailable(self.reason)
        return await self.service.discover()

    async def send(
        self, peer: Peer, message: str, hops: int = 0, *, after: int = 0
    ) -> tuple[Enqueue, Ack]:
        """Send ``message`` to ``peer`` with an id past ``after`` (the sent list's last
        number); the envelope and the receiver's ack. When the receiver stored it, its
        receipts are taken, also one that came before the ack."""
        if self.off:
            raise RelayUnavailable(self.reason)
        self.service.health.check_dir()  # nothing is sent from a directory that became unsafe
        try:
            envelope = self.service.new_envelope(
                peer.manifest.instance_id, message, hops, after=after
            )
        except ValueError as exc:
            raise RelayError(f"the message cannot be sent: {exc}") from None
        settings = self.config.relay
        intake = self.service.intake
        # Before the send: the receiver may report on it before its ack reaches us.
        intake.expect(envelope.message_id, envelope.target_instance_id)
        stored = False
        try:
            ack = await client.send(
                Path(peer.manifest.socket),
                envelope,
                io_timeout=settings.io_timeout,
                max_bytes=settings.max_bytes,
            )
            stored = ack.stored
        finally:
            intake.confirm(envelope.message_id, stored=stored)
        if not stored:
            self.service.refused(envelope)  # stored nowhere: its id goes to the next message
        return envelope, ack


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
