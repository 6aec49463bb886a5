"""How discovered peers are shown: the ``/list-agents`` table and the JSON records.

Shared by ``zcoder agents``, ``/list-agents`` and the ``list_agents`` tool, so that the three
cannot drift. Every string a peer reports about itself is untrusted; ``visible`` turns the
characters that could move the cursor or reorder the text into visible tokens (``^[``).

The table shows what the spec lists (project, pid, state, profile, model, instance id and
workspace) and fits ``TABLE_WIDTH`` columns: one row per peer, its workspace on an indented
second row. A value too long for its column is shortened in the middle (``…``), keeping its
start and its end; the instance id and the pid are never shortened, so two peers with one
project name stay distinguishable even when their workspaces are cut.
"""

from __future__ import annotations

import unicodedata

import attrs

from zcoder.relay.registry import Peer
from zcoder.text.flat import model_file_name
from zcoder.text.visible import escape_controls

__all__ = ["NO_PEERS", "TABLE_WIDTH", "peer_record", "peer_table", "shorten_middle"]

NO_PEERS = "No other local zcoder instances are available."
# An 80-column terminal, less the 4 columns the transcript indents a block by.
TABLE_WIDTH = 76
_HEADINGS = ("PROJECT", "PID", "STATE", "PROFILE", "MODEL", "INSTANCE ID")
# project, profile, model: labels, not handles; each shrinks no further than this
_SHRINKABLE = {0: 10, 3: 7, 4: 10}
_GAP = "  "
_INDENT = "  "


def _cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _width(text: str) -> int:
    return sum(_cell_width(ch) for ch in text)


def _take(text: str, cells: int) -> str:
    """The longest start of ``text`` that fits in ``cells`` columns."""
    used = 0
    for n, ch in enumerate(text):
        used += _cell_width(ch)
        if used > cells:
            return text[:n]
    return text


def shorten_middle(text: str, cells: int, *, path: bool = False) -> str:
    """``text`` in at most ``cells`` columns: its start, ``…`` and its end. A path's end is
    its most telling part (the project directory), so it keeps two thirds of the room."""
    if _width(text) <= cells:
        return text
    if cells <= 1:
        return "…"[:cells]
    tail_cells = (cells - 1) * 2 // 3 if path else (cells - 1) // 2
    head = _take(text, cells - 1 - tail_cells)
    tail = _take(text[::-1], cells - 1 - _width(head))[::-1]
    return f"{head}…{tail}"


def _fit_widths(rows: list[tuple[str, ...]], width: int) -> list[int]:
    widths = [max(_width(row[i]) for row in rows) for i in range(len(_HEADINGS))]
    over = sum(widths) + len(_GAP) * (len(widths) - 1) - width
    while over > 0:
        i = max(_SHRINKABLE, key=lambda k: widths[k] - _SHRINKABLE[k])
        if widths[i] <= _SHRINKABLE[i]:
            break  # an unusually long id: let the row run long rather than hide it
        widths[i] -= 1
        over -= 1
    return widths


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    parts = []
    for cell, room in zip(cells, widths, strict=True):
        shown = shorten_middle(cell, room)
        parts.append(shown + " " * (room - _width(shown)))
    return _GAP.join(parts).rstrip()


def peer_table(peers: list[Peer], width: int = TABLE_WIDTH) -> str:
    """The ``/list-agents`` table (no trailing newline), or its no-peers sentence."""
    if not peers:
        return NO_PEERS
    rows: list[tuple[str, ...]] = [_HEADINGS]
    for p in peers:
        m = p.manifest
        model = model_file_name(m.model)  # a model file's name, not its directories
        fields = (m.project, str(m.pid), p.shown_state, m.profile, model, m.instance_id)
        rows.append(tuple(escape_controls(f) for f in fields))
    widths = _fit_widths(rows, width)
    room = max(width - len(_INDENT), 10)
    lines = [_line(_HEADINGS, widths), f"{_INDENT}WORKSPACE"]
    for row, peer in zip(rows[1:], peers, strict=True):
        workspace = shorten_middle(escape_controls(peer.manifest.workspace), room, path=True)
        lines += [_line(row, widths), _INDENT + workspace]
    return "\n".join(lines)


def peer_record(peer: Peer) -> dict[str, object]:
    """A peer as a JSON-ready object: every field of its manifest but ``protocol`` (always
    1), in the manifest's order, with ``state`` as observed by the ping. Nothing is
    shortened or escaped here: the JSON writer escapes."""
    record: dict[str, object] = attrs.asdict(peer.manifest)
    del record["protocol"]
    record["state"] = peer.state
    if peer.model:
        record["model_state"] = peer.model
    return record
