"""What this instance sends: the relay tools' handle, the sent list and the names of targets.

``Sends`` is the tools' ``RelayHandle`` (``discover``, ``deliver``, ``sent_number``) and
``SendNaming`` (``check_send``, ``label``; ``labels.SendLabels`` asks with them), names
send targets on cards (``card_label``, ``checkout_note``), keeps the sent list
(``outbox``: ``/agents sent``, ``/agents cancel``, ``agent_message_status``) and lists
peers (``/list-agents``). It reaches the relay through the link (``app/relay/link.py``);
a message a receiver accepted is noted in ``accepted``, which the worker's ``RelayInbox``
takes and feeds to the inbound machine (a reply in a relayed turn is a round trip).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zcoder.app.relay.labels import TargetNames
from zcoder.app.relay.link import RelayLink
from zcoder.app.relay.outbox import RelayOutbox
from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay.envelope import Ack, Enqueue
from zcoder.relay.listing import peer_table
from zcoder.relay.registry import Peer, receiver_gone
from zcoder.text.visible import escape_controls
from zcoder.tools.base import Tool
from zcoder.tools.relay_tools import check_send, message_status_tool, relay_tools
from zcoder.ui.agents_text import not_listed

__all__ = ["Sends"]


class Sends:
    """One instance's sends, over its relay ``link``."""

    def __init__(self, link: RelayLink) -> None:
        self._link = link
        self._names = TargetNames(link.config.workspace)
        self.outbox = RelayOutbox()
        self.accepted: list[str] = []  # receivers that accepted a message since the last look
        self.tools: Sequence[Tool] = [*relay_tools(self), message_status_tool(self._status)]

    @property
    def available(self) -> bool:
        return self._link.available

    @property
    def reason(self) -> str:
        return self._link.reason

    @property
    def max_message_chars(self) -> int:
        return self._link.config.relay.max_message_chars

    async def discover(self) -> list[Peer]:
        peers = await self._link.discover()
        self._names.remember_peers(peers)
        return peers

    def known_peers(self) -> list[Peer]:
        """What the last discovery found (no I/O: Tab completes from it)."""
        return self._names.peers()

    def remember_sender(self, envelope: Enqueue) -> None:
        """A relayed message now runs: a reply's question can name its sender."""
        self._names.remember_sender(envelope)

    def sending_from(self) -> tuple[str, Path]:
        """This instance's id and the checked relay directory (``RelayLink.sending_from``)."""
        return self._link.sending_from()

    async def deliver(self, peer: Peer, message: str, hops: int = 0) -> Ack:
        last = self.outbox.outbox.last_number  # the number is the id's counter
        envelope, ack = await self._link.send(peer, message, hops, after=last)
        if ack.status == "accepted":
            self.accepted.append(peer.manifest.instance_id)
        m = peer.manifest
        self.outbox.record(envelope, ack, f"{escape_controls(m.project)} (pid {m.pid})")
        return ack

    def sent_number(self, message_id: str) -> int | None:
        """A stored message's number in ``/agents sent`` (``RelayHandle.sent_number``)."""
        sent = self.outbox.outbox.get(message_id)
        return None if sent is None else sent.number

    async def check_send(self, target: str, message: str) -> None:
        """Before a send's question: ``ToolError`` (the tool's own refusal) unless a fresh
        ping finds ``target`` live and the message may be sent. Refreshes what ``label``
        knows, the target's state included."""
        await check_send(self, target, message)

    def label(self, instance_id: str) -> str:
        """How a send question names its target (``TargetNames.label``)."""
        return self._names.label(instance_id)

    def checkout_note(self, instance_id: str) -> str:
        """A warning when the target works in this instance's git checkout (``""``)."""
        return self._names.checkout_note(instance_id)

    def card_label(self, instance_id: str) -> str:
        """How a send's tool card names its target (``TargetNames.card_label``)."""
        return self._names.card_label(instance_id)

    async def list_lines(self) -> list[str]:
        """``/list-agents``: the peer table's lines, or one line (a notice): the no-peers
        sentence, or that the relay is off here by configuration and why. ``ZcoderError``
        when the relay should run but cannot."""
        if self._link.off:
            return [not_listed(self._link.reason)]
        try:
            peers = await self.discover()
        except RelayError as exc:
            raise RelayUnavailable(f"/list-agents: the relay is unavailable: {exc}") from None
        return peer_table(peers).splitlines()

    def _status(self, message_id: str) -> str | None:
        """What ``agent_message_status`` reads: ``gone`` for a receiver that left (when the
        relay runs: without it the directory is not checked)."""
        try:
            _, relay_dir = self._link.sending_from()
        except RelayError:
            return self.outbox.status_text(message_id)
        return self.outbox.status_text(message_id, receiver_gone(relay_dir))
