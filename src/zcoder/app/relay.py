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
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Container, Sequence
from pathlib import Path

import attrs
import trio

from zcoder.app.inbox import Waiting, read_waiting
from zcoder.app.receipts import ReceiptSender
from zcoder.app.relay_labels import TargetNames
from zcoder.app.relay_outbox import RelayOutbox
from zcoder.app.relay_unrun import read_unrun
from zcoder.config import Config
from zcoder.errors import CommandError, RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack, Limits
from zcoder.relay.listing import peer_table
from zcoder.relay.registry import Peer
from zcoder.relay.service import RelayService
from zcoder.relay.spool import Claimed, Spool, SpoolFault
from zcoder.text.visible import escape_controls
from zcoder.tools.base import Tool
from zcoder.tools.relay_tools import check_send, message_status_tool, relay_tools
from zcoder.ui.agents_text import OFF_REASON, AgentsView, not_listed, unavailable_line
from zcoder.ui.backend import Unrun

__all__ = ["RelayLink"]

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
        self._runtime_dir = runtime_dir
        self._on_tools = on_tools
        self.service: RelayService | None = None  # read by tests; the app asks this object
        self._reason = _off_reason(config)
        self._names = TargetNames()
        self._running: Claimed | None = None
        self._claimed_from: Spool | None = None
        self._started = trio.Event()  # the service exists: its changes can be awaited
        self._seen = 0  # the count of the service's changes at the last wake-up
        self._told = False  # the failure was shown
        # zcoder's extension: receipts to our senders, the outbox of what we sent.
        self.receipts = ReceiptSender(
            me=lambda: self.service.instance_id if self.service is not None else "",
            relay_dir=lambda: self.service.health.relay_dir if self.service is not None else None,
            io_timeout=config.relay.io_timeout,
            max_bytes=config.relay.max_bytes,
        )
        self.outbox = RelayOutbox(
            receipts=self.receipts,
            spool=lambda: self.service.spool if self.service is not None else None,
        )
        self._tools = [*relay_tools(self), message_status_tool(self.outbox.status_text)]
        # Told the target of each message a receiver accepted (the exchange count).
        self.on_sent: Callable[[str], object] | None = None

    # -- start ----------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery, *, model: str, session_id: str) -> str:
        """Start the service; ``""`` when it runs (or is off by configuration: already
        said), else why it is unavailable (one line, for one notice)."""
        if self._reason or self._runtime_dir is None:
            self._reason = self._reason or "no private runtime directory"
            return "" if self._config.relay_problem or self.off else self._reason
        config = self._config
        service = RelayService(
            settings=config.relay,
            settings_problem="",
            runtime_dir=self._runtime_dir,
            env=os.environ,
            project=config.agent_name or config.workspace.name or str(config.workspace),
            workspace=config.workspace,
            profile=config.profile,
            model=model,
            session_id=session_id,
        )
        self.service = service
        service.set_extension(self.outbox.handle)
        self.outbox.notify = service.changes.note  # the relay's own primitive, no app code
        nursery.start_soon(self.receipts.run)
        self._started.set()
        await nursery.start(service.run)
        self._on_tools(self._tools if self.available else [])
        status = service.status()
        return "" if status.available else status.reason

    async def wait_for_change(self) -> None:
        """Return once the relay changed (depth, pause, availability, a fault) since the
        last return; at once if it already has. One waiter: the worker. Before ``start``
        (and for good when the relay is off) it waits for the start."""
        await self._started.wait()
        assert self.service is not None
        self._seen = await self.service.changes.wait(self._seen)

    def sync(self) -> list[str]:
        """After a change: offer the relay tools exactly while the relay is available, and
        return the lines to show the user as errors, each once: the relay's failure after
        its start (``Relay unavailable: <reason>``), quarantined entries, storage faults."""
        self._on_tools(self._tools if self.available else [])
        service = self.service
        if service is None:
            return []
        lines = service.health.take_problems()
        if service.health.problem and not self._told:
            self._told = True
            lines.append(unavailable_line(service.health.problem))
        return lines

    def _spool_call(self, action: str, call: Callable[[], object]) -> bool:
        """Run one spool operation; ``False`` if it failed, which is handed to the service
        here and nowhere else: a ``SpoolFault`` as classified (damage makes the relay
        fail, a storage fault is a line), anything unexpected as a failure of the relay.
        Never raises but what is not an ``Exception`` (``trio.Cancelled``)."""
        service = self.service
        try:
            call()
        except SpoolFault as fault:
            if service is not None:
                service.health.spool_fault(fault)
            return False
        except Exception as exc:
            _log.exception("relay spool %s failed", action)
            if service is not None:
                service.health.fail(f"the relay spool failed to {action}: {exc}")
            return False
        return True

    # -- state ----------------------------------------------------------------------------

    @property
    def off(self) -> bool:
        return self._config.relay.mode == "off" or bool(self._config.relay_problem)

    @property
    def available(self) -> bool:
        return self.service is not None and self.service.status().available

    @property
    def reason(self) -> str:
        if self.service is not None:
            return self.service.status().reason
        return self._reason

    def status(self) -> tuple[str, int]:
        """``(state, waiting)``: ``on``/``paused``/``off``/``unavailable`` and the accepted
        messages not yet started."""
        if self.service is None:
            return ("off" if self.off else "unavailable"), 0
        status = self.service.status()
        waiting = max(status.queued - (self._running is not None), 0)
        if not status.available:
            return "unavailable", waiting
        return ("paused" if status.paused else "on"), waiting

    def waiting(self) -> bool:
        """A message waits and the foreground may take it (not paused, none running; also
        after a failure of the relay that left the spool intact)."""
        spool = self._spool()
        if spool is None or spool.paused or self._running is not None:
            return False
        return self.status()[1] > 0

    def refresh(self, **fields: str) -> None:
        if self.service is not None:
            self.service.refresh(**fields)

    @property
    def config(self) -> Config:
        return self._config

    @property
    def running(self) -> Claimed | None:
        """The relayed message whose turn runs now, if any."""
        return self._running

    # -- the worker's claims --------------------------------------------------------------

    def claim(self, skip: Container[str] = ()) -> tuple[Claimed | None, list[str]]:
        """The oldest waiting message not in ``skip`` (held ones), or ``None``, and the
        quarantine reports to show (those that ``sync`` has not already returned). A claim
        that fails makes the relay fail and ends the claims: retrying would only fail again."""
        spool = self._spool()
        if spool is None or spool.paused or self._running is not None:
            return None, []

        def claim() -> None:
            try:
                self._running = spool.claim(skip)
            except SpoolFault as fault:
                raise SpoolFault(str(fault), damaged=True) from None

        self._claimed_from = spool
        if not self._spool_call("claim a message", claim):
            self._running = None
        if self._running is not None:  # a reply's question can name its target
            self._names.remember_sender(self._running.envelope)
        problems = spool.take_problems()
        return self._running, problems

    def complete(self, claimed: Claimed) -> str:
        """Settle the message whatever the turn's outcome (at most once), in the spool it
        was claimed from (also one found damaged meanwhile). Always ``""``: a receipt that
        cannot be written (it is settled all the same) is returned by the next ``sync``."""
        self._running = None
        spool, self._claimed_from = self._claimed_from, None
        if spool is not None:
            self._spool_call("settle a message", lambda: spool.complete(claimed))
        return ""

    def discard(self, message_id: str) -> bool:
        """Settle a waiting message without running it (a held message the user denied):
        claimed and settled at once, so a retry of it stays a duplicate. ``False`` when it
        no longer waits (it ran, or it is gone) or the spool refused (a fault, handed on).
        Also while a relayed turn runs: the claim skips every other message, the running
        one (already in ``processing/``) included, and this does not touch ``running``."""
        spool = self._spool()
        if spool is None:
            return False
        found: list[Claimed] = []

        def take() -> None:
            claimed = spool.claim(_AllBut(message_id))
            if claimed is not None:
                found.append(claimed)
                spool.complete(claimed)

        self._spool_call("remove a message", take)  # the spool notes the change itself
        return bool(found)

    def release(self, claimed: Claimed) -> str:
        """Put back, first in the queue, a message whose turn never reached the model (so
        nothing of it ran); ``""``, or the problem to show when it could not be put back:
        then it is settled as by ``complete`` (never run twice), its sender gets ``dropped``
        with the problem and the problem says so."""
        self._running = None
        spool = self._spool()
        try:
            if spool is not None:
                spool.unclaim(claimed)
        except (RelayError, OSError) as exc:
            _log.warning("relay: %s", exc)
            settled = self.complete(claimed)
            self.receipts.send(claimed.envelope, "dropped", f"it could not be put back: {exc}")
            return f"{exc}; it was dropped" + (f" ({settled})" if settled else "")
        return ""

    def unrun(self) -> list[Unrun]:
        """The accepted messages that have not run (not the running one), oldest first."""
        return read_unrun(self._spool(), self._limits())

    def inbox(self) -> list[Waiting]:
        """The messages waiting in the spool's inbox, oldest first (what ``Inbox`` decides
        to hold); ``[]`` without a spool to claim from."""
        return read_waiting(self._spool(), self._limits())

    def _spool(self) -> Spool | None:
        """The spool to claim from (``RelayService.spool``), else ``None``."""
        return self.service.spool if self.service is not None else None

    def _limits(self) -> Limits:
        settings = self._config.relay
        return Limits(max_bytes=settings.max_bytes, max_message_chars=settings.max_message_chars)

    # -- /agents and /list-agents ---------------------------------------------------------

    def control(self, action: str) -> AgentsView:
        """``""`` only reports, ``pause``/``resume`` switch; what the relay is afterwards
        (``ui.agents_text.agents_lines`` words it). ``ZcoderError`` for an unknown action
        or a switch while the relay is not running."""
        if action not in ("", "pause", "resume"):
            raise CommandError(f"unknown /agents action {action!r}: use pause or resume")
        service = self.service
        if action and (service is None or not self.available):
            raise RelayUnavailable(f"the relay is not running in this instance: {self.reason}")
        if service is not None and action == "pause":
            service.pause()
        if service is not None and action == "resume":
            service.resume()
        return self._view()

    def _view(self) -> AgentsView:
        state, waiting = self.status()
        service = self.service
        if service is None or state in ("off", "unavailable"):
            return AgentsView(state, self.reason, bad_setting=bool(self._config.relay_problem))
        return AgentsView(
            state,
            instance_id=service.status().instance_id,
            pid=os.getpid(),
            relay_dir=service.health.relay_dir,
            waiting=waiting,
            running=self._running is not None,
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

    @property
    def max_message_chars(self) -> int:
        return self._config.relay.max_message_chars

    async def discover(self) -> list[Peer]:
        if self.service is None:
            raise RelayUnavailable(self.reason or "the relay has not started")
        peers = await self.service.discover()
        self._names.remember_peers(peers)
        return peers

    def known_peers(self) -> list[Peer]:
        """What the last discovery found (no I/O: Tab completes from it)."""
        return self._names.peers()

    async def deliver(self, peer: Peer, message: str) -> Ack:
        if self.service is None:
            raise RelayUnavailable(self.reason)
        self.service.health.check_dir()  # nothing is sent from a directory that became unsafe
        try:
            envelope = self.service.new_envelope(peer.manifest.instance_id, message)
        except ValueError as exc:
            raise RelayError(f"the message cannot be sent: {exc}") from None
        settings = self._config.relay
        ack = await client.send(
            Path(peer.manifest.socket),
            envelope,
            io_timeout=settings.io_timeout,
            max_bytes=settings.max_bytes,
        )
        if ack.status == "accepted" and self.on_sent is not None:
            self.on_sent(peer.manifest.instance_id)
        m = peer.manifest
        self.outbox.record(envelope, ack, f"{escape_controls(m.project)} (pid {m.pid})")
        return ack

    def label(self, instance_id: str) -> str:
        """How a send question names its target (``TargetNames.label``)."""
        return self._names.label(instance_id)

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
