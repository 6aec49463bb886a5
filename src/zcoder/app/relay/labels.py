"""How a send names its target (``TargetNames``), and a send's question checked and named
before it is asked (``SendLabels``).

A target whose workspace is the same git working tree as ours is named with a warning: two
agents editing one checkout overwrite each other's changes (a separate worktree each, from
``git worktree add``, keeps them apart).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import attrs

from zcoder.approval.questions import Answer, ApprovalRequest, Approver
from zcoder.relay.envelope import Enqueue
from zcoder.relay.registry import Peer
from zcoder.text.visible import escape_controls

__all__ = ["SHARED_CHECKOUT", "SendLabels", "SendNaming", "TargetNames", "same_checkout"]

SHARED_CHECKOUT = (
    "same checkout as this instance: two agents editing one working tree collide; give "
    "each its own with `git worktree add`"
)

_STATE_NOTES = {
    "ready": "ready",
    "busy": "busy: the message waits until its current turn ends",
    "paused": "paused: it will refuse the message unless it is resumed first",
}


class TargetNames:
    """What this instance knows of the others: the last discovery (with each one's live
    state) and the senders of relayed messages (so that a reply names its target)."""

    def __init__(self, workspace: Path | None = None) -> None:
        self._workspace = workspace  # ours: a target in the same checkout is warned about
        self._peers: dict[str, Peer] = {}
        self._senders: dict[str, tuple[str, int, str]] = {}

    def remember_peers(self, peers: list[Peer]) -> None:
        """What a fresh discovery found replaces what the last one did."""
        self._peers = {p.manifest.instance_id: p for p in peers}

    def peers(self) -> list[Peer]:
        """What the last discovery found."""
        return list(self._peers.values())

    def remember_sender(self, e: Enqueue) -> None:
        self._senders[e.sender_instance_id] = (e.sender_project, e.sender_pid, e.sender_workspace)

    def _who(self, instance_id: str) -> tuple[str, int, str] | None:
        """Project, pid and workspace: what discovery last said about the instance, or
        what its last relayed message said (a reply); ``None`` when nothing is known."""
        peer = self._peers.get(instance_id)
        if peer is not None:
            m = peer.manifest
            return m.project, m.pid, m.workspace
        return self._senders.get(instance_id)

    def label(self, instance_id: str) -> str:
        """How a send question names its target: project, pid, workspace, exact id and the
        state the last ping reported (the bare id when nothing is known)."""
        who = self._who(instance_id)
        if who is None:
            return instance_id
        project, pid, workspace = who
        label = (
            f"{escape_controls(project)} (pid {pid}, {escape_controls(workspace)}) · {instance_id}"
        )
        note = self.checkout_note(instance_id)
        label += f" · {note}" if note else ""
        peer = self._peers.get(instance_id)
        if peer is None:
            return label
        state = _STATE_NOTES.get(peer.state, escape_controls(peer.state))
        if peer.model == "unavailable":
            state += "; its model server does not answer: the message waits for it"
        return f"{label} · {state}"

    def checkout_note(self, instance_id: str) -> str:
        """``SHARED_CHECKOUT`` when the target works in our git working tree, else ``""``."""
        who = self._who(instance_id)
        if who is None or self._workspace is None:
            return ""
        return SHARED_CHECKOUT if same_checkout(self._workspace, Path(who[2])) else ""

    def card_label(self, instance_id: str) -> str:
        """A send's tool card, kept to one row: project and pid before the exact id (the
        question showed the workspace too)."""
        who = self._who(instance_id)
        if who is None:
            return instance_id
        return f"{escape_controls(who[0])} (pid {who[1]}) · {instance_id}"


def same_checkout(ours: Path, theirs: Path) -> bool:
    """Whether two workspaces are in one git working tree (the nearest directory holding a
    ``.git``, a linked worktree's own included), or are one directory outside git."""
    return _checkout(ours) == _checkout(theirs)


def _checkout(path: Path) -> Path:
    path = Path(path).absolute()
    for directory in (path, *path.parents):
        if (directory / ".git").exists():
            return directory
    return path


class SendNaming(Protocol):
    """What ``SendLabels`` needs of the app's relay (``RelayLink``)."""

    async def check_send(self, target: str, message: str) -> None: ...
    def label(self, instance_id: str) -> str: ...


@attrs.frozen
class SendLabels:
    """An ``Approver`` that checks a send before asking and names its target by project,
    pid, workspace and live state.

    A send that ``check_send`` refuses (an empty or over-long message, a target that is not
    the exact id of an instance a fresh ping found live) is never asked about: ``ask``
    raises that ``ToolError`` instead, and the turn answers the call with it.
    """

    inner: Approver
    relay: SendNaming

    async def ask(self, request: ApprovalRequest) -> Answer:
        if request.kind == "send":
            await self.relay.check_send(request.target, request.text)
            request = attrs.evolve(request, target=self.relay.label(request.target))
        return await self.inner.ask(request)
