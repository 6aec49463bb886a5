"""The app's actions on zcoder's relay extension that need the whole link: ``/agents sent``,
``/agents cancel`` and the receipts on the way out.

``RelayLink.close_intake`` comes first on the way out: the relay answers ``paused`` and the
worker claims nothing more, so the messages that will not run are fixed before they are
listed. ``farewell`` then runs, before the relay's shut-down (the manifest must still be
published: a sender checks that a receipt comes from a registered instance). It tells
the sender of the running message ``cancelled`` (it started, and is about to be stopped)
and every sender of a waiting message ``dropped``, and waits a bounded time for the
receipts to go out; it does nothing (and says so) when the receipts can no longer go out
(the exit is a cancel of the root, which took the delivering task with it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack, Cancel
from zcoder.relay.manifest import load_manifest

if TYPE_CHECKING:
    from zcoder.app.relay.link import RelayLink

__all__ = ["FAREWELL_SECONDS", "cancel_sent", "farewell"]

FAREWELL_SECONDS = 1.5


async def farewell(link: RelayLink, bound: float = FAREWELL_SECONDS) -> bool:
    """``cancelled`` to the sender of the running message, ``dropped`` to those of the
    waiting ones; at most ``bound`` seconds. ``False`` when nothing could be sent (no
    relay, or its receipts can no longer go out). Never raises but ``trio.Cancelled``."""
    if link.off or not link.receipts.alive:
        return False
    link.farewell()
    await link.receipts.flush(bound)
    return True


async def cancel_sent(link: RelayLink, ref: str) -> str:
    """``/agents cancel REF``: the line to show; ``ZcoderError`` saying why it could not."""
    me, relay_dir = link.sending_from()
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

    return await link.outbox.cancel(ref, me=me, socket_of=socket_of, deliver=deliver)
