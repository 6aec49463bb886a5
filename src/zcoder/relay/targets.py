"""Which live peer a user's ``/send TARGET`` means, and what Tab offers for TARGET. Pure.

The model's ``send_agent_message`` takes only an exact instance id (the spec: a label alone
is ambiguous). A user may also type a label, because the refusal below makes a label safe:
``@label`` (or a bare label that is no instance id) must match exactly one live peer's
``project``, compared without regard to case; two peers with that label, or none, are
refused with the candidates listed, and nothing is sent. An exact instance id always wins.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from zcoder.errors import CommandError
from zcoder.relay.listing import NO_PEERS
from zcoder.relay.manifest import Manifest
from zcoder.relay.registry import Peer
from zcoder.text.visible import escape_controls

__all__ = [
    "MAX_CANDIDATES",
    "describe_peer",
    "resolve_target",
    "target_completions",
    "target_descriptions",
]

MAX_CANDIDATES = 8  # listed in a refusal; the rest are counted


def describe_peer(peer: Peer) -> str:
    """``@label (pid N, workspace) · id``: enough to pick one peer by hand."""
    m = peer.manifest
    project, workspace = escape_controls(m.project), escape_controls(m.workspace)
    return f"@{project} (pid {m.pid}, {workspace}) · {m.instance_id}"


def _listed(peers: Sequence[Peer]) -> str:
    shown = "; ".join(describe_peer(p) for p in peers[:MAX_CANDIDATES])
    more = len(peers) - MAX_CANDIDATES
    return shown + (f"; and {more} more" if more > 0 else "")


def resolve_target(target: str, peers: Sequence[Peer], own: Manifest | None = None) -> Peer:
    """The one peer of ``peers`` (a fresh discovery) that ``target`` names: its exact
    instance id, or its label with or without ``@``. ``CommandError`` naming the candidates
    when the label is ambiguous, and the live peers when nothing matches: that ``target``
    is this instance (``own``) when it names only that."""
    if not target.startswith("@"):
        exact = next((p for p in peers if p.manifest.instance_id == target), None)
        if exact is not None:
            return exact
    label = target.removeprefix("@")
    wanted = label.casefold()
    matches = [p for p in peers if wanted and p.manifest.project.casefold() == wanted]
    if len(matches) == 1:
        return matches[0]
    shown = escape_controls(target)
    if matches:
        raise CommandError(
            f"/send: {len(matches)} live instances are named @{escape_controls(label)}: "
            f"{_listed(matches)}. Send to one by its instance id."
        )
    if own is not None and (target == own.instance_id or wanted == own.project.casefold()):
        others = f"Other instances: {_listed(peers)}." if peers else NO_PEERS
        raise CommandError(
            f"/send: {shown} is this instance ({escape_controls(own.project)}, pid {own.pid}): "
            f"a message goes to another instance. {others}"
        )
    if not peers:
        raise CommandError(f"/send: no live instance is named {shown!r}. {NO_PEERS}")
    raise CommandError(
        f"/send: no live instance has the id or name {shown!r}. Live instances: {_listed(peers)}."
    )


def _typeable(label: str) -> bool:
    # A label with a space (a workspace basename may have one) would end TARGET early.
    return bool(label) and label.isprintable() and not any(c.isspace() for c in label)


def target_completions(peers: Sequence[Peer]) -> list[str]:
    """What Tab offers after ``/send ``: ``@label`` for each label exactly one peer has (and
    that can be typed), the instance id of every other peer; sorted, labels first."""
    counts = Counter(p.manifest.project.casefold() for p in peers)
    labels, ids = set(), set()
    for p in peers:
        project = p.manifest.project
        if counts[project.casefold()] == 1 and _typeable(project):
            labels.add(f"@{project}")
        else:
            ids.add(p.manifest.instance_id)
    return [*sorted(labels), *sorted(ids)]


def target_descriptions(peers: Sequence[Peer]) -> dict[str, str]:
    """What the Tab menu may show beside each of ``target_completions``: for a bare id
    (its label is shared, or cannot be typed) the label, pid and workspace, so that two
    peers named alike can be told apart; for a label, its pid and workspace."""
    described = {}
    for p in peers:
        m = p.manifest
        where = f"pid {m.pid}, {escape_controls(m.workspace)}"
        described[m.instance_id] = f"@{escape_controls(m.project)} ({where})"
        described.setdefault(f"@{m.project}", f"({where})")
    return {option: described[option] for option in target_completions(peers)}
