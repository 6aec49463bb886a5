"""How discovered peers are shown: the ``/list-agents`` table and the JSON records.

Shared by ``zcoder agents``, ``/list-agents`` and the ``list_agents`` tool, so that the three
cannot drift. Every string a peer reports about itself is untrusted; ``visible`` escapes the
characters that could move the cursor or reorder the text on a terminal.
"""

from __future__ import annotations

import attrs

from zcoder.relay.registry import Peer

__all__ = ["NO_PEERS", "peer_record", "peer_table", "visible"]

NO_PEERS = "No other local zcoder instances are available."
_HEADINGS = ("PROJECT", "PID", "STATE", "INSTANCE ID", "WORKSPACE")
_MIN_WIDTHS = (16, 6, 7, 17)
# Bidi embeddings, overrides and isolates, marks, and the line/paragraph separators.
_INVISIBLE = frozenset("\u061c\u200e\u200f\u2028\u2029\u2066\u2067\u2068\u2069") | frozenset(
    map(chr, range(0x202A, 0x202F))
)


def visible(text: str) -> str:
    """``text`` with C0/C1 controls, DEL, bidi controls and line separators written as
    escapes (``\\x1b``, ``\\n``, ``\\u202e``), so that a peer's self-reported metadata cannot
    move the cursor, clear the screen or reorder what is displayed."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0 or ch in _INVISIBLE:
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def peer_table(peers: list[Peer]) -> str:
    """The spec's ``/list-agents`` table (no trailing newline), or its no-peers sentence."""
    if not peers:
        return NO_PEERS
    rows = [_HEADINGS] + [
        (
            visible(p.manifest.project),
            str(p.manifest.pid),
            visible(p.state),
            p.manifest.instance_id,
            visible(p.manifest.workspace),
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
