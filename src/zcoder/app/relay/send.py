"""The user's ``/send TARGET TEXT``: a send without the model, and the peers Tab offers.

The user typed the target and the text, so there is no question; everything else is the
model's send: the same message checks, a fresh discovery, and ``send_to``, the tool's own
delivery (its acks and wording). Only the target is looked up differently: an exact id or
a label that exactly one live peer has (``relay.targets``). The result is a tool card named
``/send`` in the transcript, persisted with the session; the model's history is not
touched (no turn starts, and the model did not send it).

``PeerRefresh`` keeps what Tab completes from fresh without ever blocking a key: the
completer reads the last discovery and asks for a new one, which a task of the root
nursery runs (at most one at a time, at most every ``min_interval`` seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import trio

from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, RelayError, RelayUnavailable
from zcoder.relay.manifest import Manifest, load_manifest
from zcoder.relay.registry import Peer
from zcoder.relay.targets import resolve_target
from zcoder.tools.relay_tools import RelayHandle, check_message, send_to

__all__ = ["SEND_CARD", "USAGE", "PeerRefresh", "send_command", "split_send"]

_log = logging.getLogger(__name__)
SEND_CARD = "/send"  # the card's name: the user sent it, not the model
USAGE = "usage: /send TARGET TEXT (TARGET: @label or an exact instance id; see /list-agents)"
_DISCOVERY_SECONDS = 10.0


def split_send(args: str) -> tuple[str, str]:
    """``TARGET TEXT`` -> ``(target, text)``; ``CommandError`` (the usage) when either is
    missing. The text is kept as typed after the whitespace that ends the target."""
    parts = args.strip().split(None, 1)
    if len(parts) < 2 or not parts[1].strip():
        raise CommandError(USAGE)
    return parts[0], parts[1]


class SendLink(RelayHandle, Protocol):
    """What ``/send`` needs of the app's relay link: the tools' handle, and how a card
    names a peer (as the model's send card does)."""

    @property
    def available(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    def card_label(self, instance_id: str) -> str: ...
    def sending_from(self) -> tuple[str, Path]: ...
    def checkout_note(self, instance_id: str) -> str: ...


async def send_command(link: SendLink, args: str) -> TranscriptEvent:
    """Send ``/send``'s text to its target; the card to show and keep (``delivered`` when
    the receiver stored it, else ``undelivered`` with why). ``ZcoderError`` before anything
    is sent: bad usage, the relay not running here, a bad message, a target that is not
    exactly one live peer (with the candidates)."""
    target, text = split_send(args)
    if not link.available:
        raise RelayUnavailable(f"/send: the relay is not running in this instance: {link.reason}")
    check_message(link, text)
    try:
        with trio.fail_after(_DISCOVERY_SECONDS):
            peers = await link.discover()
    except (RelayError, trio.TooSlowError) as exc:
        why = str(exc) or "discovery took too long"
        raise RelayUnavailable(f"/send: the relay is unavailable: {why}") from None
    peer = resolve_target(target, peers, _own(link))
    result = await send_to(link, peer, text)
    state = "delivered" if result.ok else "undelivered"
    label = link.card_label(peer.manifest.instance_id)
    meta = {**result.meta, "name": SEND_CARD, "target": label, "state": state}
    note = link.checkout_note(peer.manifest.instance_id)
    text = f"{result.summary} · {note}" if note else result.summary
    return TranscriptEvent(role="tool", text=text, meta=meta)


def _own(link: SendLink) -> Manifest | None:
    """This instance's manifest (to say that a target is this instance), when readable."""
    try:
        instance_id, relay_dir = link.sending_from()
        return load_manifest(relay_dir, instance_id)
    except RelayError:
        return None


class PeerRefresh:
    """Runs the discoveries that Tab asks for, in the background, one at a time."""

    def __init__(
        self, discover: Callable[[], Awaitable[list[Peer]]], *, min_interval: float = 2.0
    ) -> None:
        self._discover = discover
        self._min_interval = min_interval
        self._wanted = trio.Event()

    def ask(self) -> None:
        """Ask for a discovery soon (from Trio; the completer goes through the token)."""
        self._wanted.set()

    async def run(self) -> None:
        """Forever: wait to be asked, discover (its result is what Tab offers next), rest."""
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            try:
                with trio.fail_after(_DISCOVERY_SECONDS):
                    await self._discover()
            except (RelayError, trio.TooSlowError) as exc:
                # Tab offers what the last good discovery found; /send says the problem.
                _log.debug("discovery for completion failed: %s", exc)
            await trio.sleep(self._min_interval)
