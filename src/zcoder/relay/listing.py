"""How discovered peers are shown: the ``/list-agents`` table and the JSON records.

Shared by ``zcoder agents``, ``/list-agents`` and the ``list_agents`` tool, so that the three
cannot drift. Every string a peer reports about itself is untrusted; ``visible`` escapes the
characters that could move the cursor or reorder the text on a terminal.
"""

from __future__ import annotations

import attrs

from zcoder.relay.registry import Peer
from zcoder.visible import escape_controls

__all__ = ["NO_PEERS", "peer_record", "peer_table"]

NO_PEERS = "No other local zcoder instances are available."
_HEADINGS = ("PROJECT", "PID", "STATE", "INSTANCE ID", "WORKSPACE")
_MIN_WIDTHS = (16, 6, 7, 17)
# Bidi embeddings, overrides and isolates, marks, and the line/paragraph separators.


def peer_table(peers: list[Peer]) -> str:
    """The spec's ``/list-agents`` table (no trailing newline), or its no-peers sentence."""
    if not peers:
        return NO_PEERS
    rows = [_HEADINGS] + [
        (
            escape_controls(p.manifest.project),
            str(p.manifest.pid),
            escape_controls(p.state),
            p.manifest.instance_id,
            escape_controls(p.manifest.workspace),
        )
        for p in peers
    ]
    widths = [max(low, *(len(r[i]) for r in rows)) for i, low in enumerate(_MIN_WIDTHS)]
    return "\n".join(
        " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + " "
        + row[-1]
        for row in rows
    )


def peer_record(peer: Peer) -> dict[str, object]:
    """A peer as a JSON-ready object: the manifest's fields but ``protocol``, with ``state``
    as observed by the ping."""
    record: dict[str, object] = attrs.asdict(peer.manifest)
    del record["protocol"]
    record["state"] = peer.state
    return record
