"""The app's actions on zcoder's relay extension that need the whole link: ``/agents sent``,
``/agents cancel`` and the ``dropped`` receipts on the way out.

``close_intake`` comes first on the way out: the relay answers ``paused`` and the worker
claims nothing more, so the messages that will not run are fixed before they are listed.
``farewell`` then runs, before the relay's shut-down (the manifest must still be
published: a sender checks that a receipt comes from a registered instance). It tells
every sender of a message that will not run (waiting, or running and about to be stopped)
``dropped``, and waits a bounded time for the receipts to go out; it does nothing (and
says so) when the receipts can no longer go out (the exit is a cancel of the root, which
took the delivering task with it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zcoder.app.relay_unrun import read_inbox
from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Limits
from zcoder.relay.manifest import load_manifest
from zcoder.relay.spool import Spool

if TYPE_CHECKING:
    from zcoder.app.relay import RelayLink

__all__ = ["FAREWELL_SECONDS", "cancel_sent", "close_intake", "farewell", "waiting_envelopes"]

FAREWELL_SECONDS = 1.5
_DROPPED = "the receiver exited before running it"


def waiting_envelopes(spool: Spool | None, limits: Limits) -> list[Enqueue]:
    """The envelopes in ``inbox/``, oldest first; unreadable entries are skipped."""
    return [envelope for envelope, _ in read_inbox(spool, limits)]


def close_intake(link: RelayLink) -> None:
    """Accept no more messages (the listener answers ``paused``) and claim none (a claim
    needs an unpaused spool). Never raises: a ``state`` file that cannot be written is a
    fault of the relay's, the switch holds in memory."""
    if link.service is not None:
        link.service.pause()


async def farewell(link: RelayLink, bound: float = FAREWELL_SECONDS) -> bool:
    """``dropped`` to the sender of every message that will not run; at most ``bound``
    seconds. ``False`` when nothing could be sent (no relay, or its receipts can no longer
    go out). Never raises but ``trio.Cancelled``."""
    service = link.service
    if service is None or not link.receipts.alive:
        return False
    settings = link.config.relay
    limits = Limits(max_bytes=settings.max_bytes, max_message_chars=settings.max_message_chars)
    running = link.running
    messages = [running.envelope] if running is not None else []
    messages += waiting_envelopes(service.spool, limits)
    for envelope in messages:
        link.receipts.send(envelope, "dropped", _DROPPED)
    await link.receipts.flush(bound)
    return True


async def cancel_sent(link: RelayLink, ref: str) -> str:
    """``/agents cancel REF``: the line to show; ``ZcoderError`` saying why it could not."""
    service = link.service
    if service is None or not link.available:
        raise RelayUnavailable(f"the relay is not running in this instance: {link.reason}")
    relay_dir = service.health.check_dir()
    settings = link.config.relay

    def socket_of(instance_id: str) -> Path:
        try:
            return Path(load_manifest(relay_dir, instance_id).socket)
        except RelayError as exc:
            raise RelayUnavailable(f"the receiver is gone: {exc}") from None

    async def deliver(path: Path, request: Cancel) -> Ack:
        return await client.request(
            path, request, io_timeout=settings.io_timeout, max_bytes=settings.max_bytes
        )

    return await link.outbox.cancel(
        ref, me=service.instance_id, socket_of=socket_of, deliver=deliver
    )
