"""The relay tools: ``list_agents`` and ``send_agent_message`` (floor 3).

Both work through a ``RelayHandle`` (the app implements it over the relay service), so this
module needs neither the app nor a running listener. Discovery is the same ``discover``
that ``/list-agents`` and ``zcoder agents`` use. The user's yes for a send is asked by the
agent before the tool runs (and a relayed turn may only answer its sender); this module
checks the target and the message and reports the receiver's exact acknowledgement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from zcoder.errors import RelayError, ToolError
from zcoder.relay.envelope import Ack
from zcoder.relay.listing import NO_PEERS
from zcoder.relay.registry import Peer
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.visible import escape_controls

__all__ = ["LIST_AGENTS", "MAX_LISTED", "SEND_AGENT_MESSAGE", "RelayHandle", "relay_tools"]

LIST_AGENTS = "list_agents"
SEND_AGENT_MESSAGE = "send_agent_message"
MAX_LISTED = 32  # records returned to the model; discovery itself is bounded too
_FIELDS = ("instance_id", "project", "workspace", "pid", "profile", "model", "state")


class RelayHandle(Protocol):
    """What the tools need from the relay of this instance."""

    @property
    def max_message_chars(self) -> int: ...

    async def discover(self) -> list[Peer]:
        """The live peers (this instance excluded), sorted; ``RelayError`` when unusable."""
        ...

    async def deliver(self, peer: Peer, message: str) -> Ack:
        """Send ``message`` to ``peer`` as a new enqueue; its ack, or ``RelayError``."""
        ...


def _record(peer: Peer) -> dict[str, Any]:
    m = peer.manifest
    values = (m.instance_id, m.project, m.workspace, m.pid, m.profile, m.model, peer.state)
    return dict(zip(_FIELDS, values, strict=True))


def _label(peer: Peer) -> str:
    m = peer.manifest
    project, workspace = escape_controls(m.project), escape_controls(m.workspace)
    return f"{m.instance_id} ({project}, pid {m.pid}, {workspace})"


async def _peers(handle: RelayHandle) -> list[Peer]:
    try:
        return await handle.discover()
    except RelayError as exc:
        raise ToolError(f"the relay is not usable: {exc}") from None


def _list_agents_tool(handle: RelayHandle) -> Tool:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        peers = await _peers(handle)
        if not peers:
            return ToolResult(NO_PEERS, summary="no other instances")
        shown = [_record(p) for p in peers[:MAX_LISTED]]
        text = "\n".join(json.dumps(r, ensure_ascii=False) for r in shown)
        if len(peers) > MAX_LISTED:
            text += f"\n({len(peers) - MAX_LISTED} more instances not listed)"
        noun = "instance" if len(peers) == 1 else "instances"
        return ToolResult(text, summary=f"{len(peers)} other {noun}")

    spec = ToolSpec(
        name=LIST_AGENTS,
        description=(
            "List the other live zcoder instances of this user on this machine, one JSON "
            "object per line: instance_id, project, workspace, pid, profile, model, state. "
            "Use the exact instance_id with send_agent_message; project names and pids are "
            "only labels. Listing contacts nobody and needs no approval."
        ),
        parameters={"type": "object", "properties": {}},
    )
    return Tool(spec, run)


def _unknown_target(target: str, peers: list[Peer]) -> ToolError:
    """The error for a target that is not an exact live instance id, with the candidates."""
    wanted = target.strip().casefold()
    close = [
        p
        for p in peers
        if wanted
        and (
            p.manifest.project.casefold() == wanted
            or str(p.manifest.pid) == wanted
            or p.manifest.instance_id.startswith(wanted)
            or wanted in p.manifest.workspace.casefold()
        )
    ]
    if close:
        names = "; ".join(_label(p) for p in close)
        return ToolError(
            f"{escape_controls(target)!r} is not an exact instance id, and a project name or pid "
            f"alone is ambiguous. Matching instances: {names}. Pass the exact instance_id."
        )
    if not peers:
        return ToolError(f"no live zcoder instance has id {escape_controls(target)!r}: {NO_PEERS}")
    names = "; ".join(_label(p) for p in peers[:MAX_LISTED])
    return ToolError(
        f"no live zcoder instance has id {escape_controls(target)!r}. Live instances: {names}. "
        "Call list_agents and use an exact instance_id."
    )


def _ack_text(ack: Ack, peer: Peer) -> tuple[str, str]:
    """The result text (its first line is the exact ack status) and the card's summary."""
    m = peer.manifest
    who = f"{escape_controls(m.project)} (pid {m.pid})"
    if ack.status == "accepted":
        status = f"accepted (queue position {ack.queue_position})"
        note = (
            f"{who} stored the message in its queue. This says nothing about whether the "
            "task will be done: do not claim it was completed."
        )
    else:
        status = ack.status
        note = f"{who} did not queue the message."
    return f"{status}\n{note}", f"{status} by {who}"


def _send_tool(handle: RelayHandle) -> Tool:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        target, message = args["target_instance_id"], args["message"]
        if not message.strip():
            raise ToolError("message is empty: send a self-contained task")
        limit = handle.max_message_chars
        if len(message) > limit:
            raise ToolError(
                f"message is {len(message)} characters; the limit is {limit} "
                "(ZCODER_RELAY_MAX_MESSAGE_CHARS): send a shorter, self-contained task"
            )
        peers = await _peers(handle)
        peer = next((p for p in peers if p.manifest.instance_id == target), None)
        if peer is None:
            raise _unknown_target(target, peers)
        try:
            ack = await handle.deliver(peer, message)
        except RelayError as exc:
            raise ToolError(f"the message was not delivered to {_label(peer)}: {exc}") from None
        text, summary = _ack_text(ack, peer)
        return ToolResult(text, summary=summary)

    spec = ToolSpec(
        name=SEND_AGENT_MESSAGE,
        description=(
            "Send a task to another zcoder instance on this machine; it runs there as a "
            "new turn. Call it ONLY when the current user explicitly asked you to contact "
            "another zcoder instance, never merely because another project may be "
            "affected. First call list_agents and use the exact instance_id. Send the "
            "smallest self-contained task with the relevant facts; never include secrets or "
            "unrelated conversation history. The user is asked to confirm every send. The "
            "result is the receiver's acknowledgement: 'accepted' only means the message "
            "was queued, so never claim that the other instance completed anything."
        ),
        parameters={
            "type": "object",
            "properties": {
                "target_instance_id": {
                    "type": "string",
                    "description": "The exact instance_id returned by list_agents.",
                },
                "message": {
                    "type": "string",
                    "description": "The self-contained task text, sent as literal data.",
                },
            },
            "required": ["target_instance_id", "message"],
        },
    )
    return Tool(spec, run)


def relay_tools(handle: RelayHandle) -> list[Tool]:
    """``list_agents`` and ``send_agent_message`` over ``handle``, in that order."""
    return [_list_agents_tool(handle), _send_tool(handle)]
