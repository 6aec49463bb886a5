"""The accepted relayed messages that have not run, read back from the spool's inbox.

Leaving the app drops them (the spec: messages do not survive a deliberate shut-down), so
the first ``/quit`` warns with this list and the last lines printed name it. Read on demand
from the inbox (a few small files), never kept: the spool stays the one truth about what
waits. An entry that cannot be read would be quarantined by the next claim, never run, so
it is not listed.
"""

from __future__ import annotations

import os

from zcoder.relay.envelope import Enqueue, Limits
from zcoder.relay.spool import Spool
from zcoder.relay.spool_entry import ENTRY_NAME_RE, InvalidEntry, read_entry
from zcoder.ui.backend import Unrun

__all__ = ["read_inbox", "read_unrun", "sender_label"]


def sender_label(envelope: Enqueue) -> str:
    """``alpha (pid 123)``: how the user knows a sender (raw; escaped where shown)."""
    return f"{envelope.sender_project} (pid {envelope.sender_pid})"


def read_inbox(spool: Spool | None, limits: Limits) -> list[tuple[Enqueue, bool]]:
    """The envelopes in ``inbox/`` with whether their sender was verified, oldest first
    (``[]`` without a spool or an inbox)."""
    if spool is None:
        return []
    inbox = spool.root / "inbox"
    try:
        names = sorted(os.listdir(inbox))
    except OSError:
        return []
    out = []
    for name in names:
        found = ENTRY_NAME_RE.fullmatch(name)
        if found is None:
            continue
        try:
            out.append(read_entry(inbox / name, found.group(2), limits))
        except InvalidEntry:
            continue
    return out


def read_unrun(spool: Spool | None, limits: Limits) -> list[Unrun]:
    """The messages in ``inbox/``, oldest first, as the quit warning names them."""
    return [Unrun(e.message_id, sender_label(e), e.body) for e, _ in read_inbox(spool, limits)]
