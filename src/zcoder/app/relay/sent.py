"""The app's actions on zcoder's relay extension that need the whole link: ``/agents sent``,
``/agents cancel`` and the receipts on the way out.

``relay.registry.receiver_gone`` is how the sender finds a receiver that left without a
final receipt (it crashed, or its ``dropped`` could not go out): its manifest is no longer
in the relay directory (or no longer usable), or the process it names is dead. A live,
registered receiver's manifest stays until it exits, so this never calls a live receiver
gone; a crashed one's stale manifest still names its dead pid. ``/agents sent`` shows such
a message ``gone`` and ``/agents cancel`` says *the receiver is gone* without connecting.

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

import trio

from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay import client
from zcoder.relay.envelope import Ack, Cancel
from zcoder.relay.manifest import load_manifest
from zcoder.relay.registry import receiver_gone

if TYPE_CHECKING:
    from zcoder.app.relay.inbox import RelayInbox
    from zcoder.app.relay.link import RelayLink
    from zcoder.app.relay.sends import Sends

__all__ = [
    "FAREWELL_SECONDS",
    "LOOK_SECONDS",
    "cancel_sent",
    "farewell",
    "sent_lines",
    "watch_receivers",
]

FAREWELL_SECONDS = 1.5
LOOK_SECONDS = 2.0  # as often as an instance looks at its own files


async def farewell(link: RelayLink, inbox: RelayInbox, bound: float = FAREWELL_SECONDS) -> bool:
    """``cancelled`` to the sender of the running message, ``dropped`` to those of the
    waiting ones; at most ``bound`` seconds. ``False`` when nothing could be sent (no
    relay, or its receipts can no longer go out). Never raises but ``trio.Cancelled``."""
    if link.off or not link.receipts.alive:
        return False
    inbox.farewell()
    await link.receipts.flush(bound)
    return True


def sent_lines(link: RelayLink, sends: Sends) -> list[str]:
    """``/agents sent``, with ``gone`` for the receivers that left (when the relay runs:
    without it the directory is not checked)."""
    try:
        _, relay_dir = link.sending_from()
    except RelayError:
        return sends.outbox.sent_lines()
    return sends.outbox.sent_lines(receiver_gone(relay_dir))


async def cancel_sent(link: RelayLink, sends: Sends, ref: str) -> str:
    """``/agents cancel REF``: the line to show; ``ZcoderError`` saying why it could not."""
    me, relay_dir = link.sending_from()
    settings = link.config.relay

    def socket_of(instance_id: str) -> Path:
        try:
            return Path(load_manifest(relay_dir, instance_id).socket)
        except RelayError:  # it left between the check and now
            raise RelayUnavailable("the receiver is gone: it left the relay directory") from None

    async def deliver(path: Path, request: Cancel) -> Ack:
        return await client.request(
            path, request, io_timeout=settings.io_timeout, max_bytes=settings.max_bytes
        )

    return await sends.outbox.cancel(
        ref, me=me, socket_of=socket_of, deliver=deliver, gone=receiver_gone(relay_dir)
    )


async def watch_receivers(link: RelayLink, sends: Sends, interval: float = LOOK_SECONDS) -> None:
    """Forever: every ``interval`` seconds while a message of ours waits for a report,
    look whether its receiver left without one (it crashed or was killed), and tell it
    once (the worker shows it with the receipts: the relay's change wakes it). A quitting
    receiver says ``dropped`` itself; nobody reports for one that died."""
    while True:
        await trio.sleep(interval)
        if not sends.outbox.waits_on_others():
            continue
        try:
            _, relay_dir = link.sending_from()
        except RelayError:
            continue
        if sends.outbox.departed(receiver_gone(relay_dir)):
            link.wake()
