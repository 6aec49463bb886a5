"""The relay tools: ``list_agents`` and ``send_agent_message`` (floor 3).

Both work through a ``RelayHandle``, the tools' narrow view of the app's ``RelayLink``, so
this module needs neither the app nor a running listener. Discovery is the same ``discover``
that ``/list-agents`` and ``zcoder agents`` use. The user's yes for a send is asked by the
agent before the tool runs (and a relayed turn may only answer its sender), after
``check_send`` found the target live; this module checks the target and the message again
and reports the receiver's answer. A send is a success only when the receiver stored the
message (``accepted``, or ``duplicate``: an earlier attempt was stored); anything else is
a failed result that begins ``not delivered:``, and its card says the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from zcoder.errors import RelayError, ToolError
from zcoder.relay.envelope import Ack
from zcoder.relay.listing import NO_PEERS
from zcoder.relay.outbox import card_meta
from zcoder.relay.registry import Peer
from zcoder.text.visible import escape_controls
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec

__all__ = [
    "AGENT_MESSAGE_STATUS",
    "LIST_AGENTS",
    "MAX_LISTED",
    "SEND_AGENT_MESSAGE",
    "RelayHandle",
    "check_message",
    "check_send",
    "message_status_tool",
    "relay_tools",
    "send_to",
]

LIST_AGENTS = "list_agents"
SEND_AGENT_MESSAGE = "send_agent_message"
AGENT_MESSAGE_STATUS = "agent_message_status"
MAX_LISTED = 32  # records returned to the model; discovery itself is bounded too
_FIELDS = ("instance_id", "project", "workspace", "pid", "profile", "model", "state")


class RelayHandle(Protocol):
    """What the tools need from the relay of this instance: the tools' view of the app's
    ``RelayLink`` (which satisfies it structurally), not a wrapper around it. It exists so
    that floor 3 never imports ``app/``; tests pass a fake."""

    @property
    def max_message_chars(self) -> int: ...

    async def discover(self) -> list[Peer]:
        """The live peers (this instance excluded), sorted; ``RelayError`` when unusable."""
        ...

    async def deliver(self, peer: Peer, message: str, hops: int = 0) -> Ack:
        """Send ``message`` to ``peer`` as a new enqueue, ``hops`` relayed turns deep (0
        for a person's prompt or ``/send``); its ack, or ``RelayError``."""
        ...

    def sent_number(self, message_id: str) -> int | None:
        """A stored message's number in ``/agents sent`` (its receipts name it ``#N``);
        ``None`` when this instance keeps no such list."""
        ...


def _record(peer: Peer) -> dict[str, Any]:
    m = peer.manifest
    values = (m.instance_id, m.project, m.workspace, m.pid, m.profile, m.model, peer.shown_state)
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
    """The error for a target that is not an exact live instance id, with the live ids."""
    wanted = target.strip().casefold()
    close = [
        p
        for p in peers
        if wanted
        and (
            p.manifest.project.casefold() == wanted
            or str(p.manifest.pid) == wanted
            or p.manifest.instance_id.casefold().startswith(wanted)
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


def check_message(handle: RelayHandle, message: str) -> None:
    """``ToolError`` when ``message`` is empty, only whitespace or over the limit: what any
    send (the model's, the user's ``/send``) checks before it contacts anybody."""
    if not message.strip():
        raise ToolError("message is empty: send a self-contained task")
    limit = handle.max_message_chars
    if len(message) > limit:
        raise ToolError(
            f"message is {len(message)} characters; the limit is {limit} "
            "(ZCODER_RELAY_MAX_MESSAGE_CHARS): send a shorter, self-contained task"
        )


async def check_send(handle: RelayHandle, target: str, message: str) -> Peer:
    """The live peer a send of ``message`` to ``target`` would go to, found by a fresh
    discovery (so a fresh ping). ``ToolError``, the refusal the model gets, when the message
    is empty, only whitespace or over the limit, or when ``target`` is not the exact id of a
    live instance (a project name, a pid, a prefix, a dead id). Asked before the user's
    question, and again when the tool runs: the peer may have gone meanwhile."""
    check_message(handle, message)
    peers = await _peers(handle)
    peer = next((p for p in peers if p.manifest.instance_id == target), None)
    if peer is None:
        raise _unknown_target(target, peers)
    return peer


# Why a receiver did not store a message, by its ack status ({p}: its project).
_REFUSED = {
    "paused": "{p} is paused: it refuses new messages until it is resumed",
    "full": "{p}'s queue is full",
    "invalid": "{p} rejected the message as invalid",
    "wrong_target": "the instance at {p}'s socket says it is not {i}",
    "unsupported": "{p} does not support this protocol version or request",
}
_NOT_STORED = "Nothing is known to be stored there. Tell the user; do not retry unless asked."
_NOT_DONE = "This says nothing about whether the task will be done: do not claim it was completed."


def _not_delivered(why: str) -> ToolResult:
    """A send that was not stored: the card says ``not delivered: <why>``, and the model's
    result says the same words."""
    return ToolResult(f"Error: not delivered: {why}.\n{_NOT_STORED}", ok=False, summary=why)


def _ack_result(ack: Ack, peer: Peer) -> ToolResult:
    """The result of a send the receiver answered: stored (``accepted``, or ``duplicate``:
    an earlier attempt was), or not delivered."""
    m = peer.manifest
    project = escape_controls(m.project)
    if ack.status == "accepted":
        follow = _follow_up(ack)
        # A peer may accept without a readable position (a reader is liberal): say no more.
        position = ack.queue_position
        status = "accepted" if position is None else f"accepted (queue position {position})"
        note = f"{project} (pid {m.pid}) stored the message in its queue. {_NOT_DONE}"
        summary = f"{status} by {project} (pid {m.pid})"
        if not ack.receipts:
            summary += f" · {NO_RECEIPTS}"
        return ToolResult(f"{status}\n{note}\n{follow}", summary=summary)
    if ack.status == "duplicate":
        said = f"duplicate: {project} had already accepted this message earlier"
        return ToolResult(f"{said} (same message id).\n{_NOT_DONE}", summary=said)
    why = _REFUSED.get(ack.status, "{p} answered {s}")
    return _not_delivered(why.format(p=project, i=m.instance_id, s=ack.status))


NO_RECEIPTS = "this peer sends no receipts"


def _follow_up(ack: Ack) -> str:
    """What the model may learn later of a stored message, and how."""
    if ack.receipts:
        return (
            f"Message id {ack.message_id}: its receiver reports when it starts and how it "
            f"ends; {AGENT_MESSAGE_STATUS} reads the latest report. Tell the user only what "
            "a report says."
        )
    return f"{NO_RECEIPTS.capitalize()}: nothing more will be known of this message."


def message_status_tool(status: Callable[[str], str | None]) -> Tool:
    """``agent_message_status``: the latest state of a message this instance sent, as its
    receiver reported it (``status`` returns the record, ``None`` for an unknown id)."""

    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        message_id = args["message_id"]
        text = status(message_id)
        if text is None:
            raise ToolError(
                f"no message {escape_controls(message_id)!r} was sent from this instance"
            )
        state = json.loads(text.partition("\n")[0]).get("state", "?")
        return ToolResult(text, summary=f"{message_id}: {state}")

    spec = ToolSpec(
        name=AGENT_MESSAGE_STATUS,
        description=(
            "Read the latest state of a message you sent with send_agent_message, as its "
            "receiver reported it: accepted (queued, nothing more known yet), held, "
            "started, waiting (for the receiver's user; detail says what it is asked), "
            "completed or blocked (with its final answer and the files it "
            "changed), failed, cancelled, dropped or denied. Report only what this says: "
            "never claim a task was done unless the state is completed."
        ),
        parameters={
            "type": "object",
            "properties": {
                "message_id": {
                    "type": "string",
                    "description": "The message id from send_agent_message's result.",
                }
            },
            "required": ["message_id"],
        },
    )
    return Tool(spec, run)


async def send_to(handle: RelayHandle, peer: Peer, message: str, hops: int = 0) -> ToolResult:
    """Deliver a checked ``message`` to ``peer`` and say what became of it: the one delivery
    path of every send, the model's tool and the user's ``/send``. ``ok`` exactly when the
    receiver stored it; a peer that does not answer is a ``not delivered:`` result."""
    try:
        ack = await handle.deliver(peer, message, hops)
    except RelayError as exc:
        project = escape_controls(peer.manifest.project)
        return _not_delivered(f"{project} did not answer: {exc}")
    result = _ack_result(ack, peer)
    if not ack.stored:
        return result
    number = handle.sent_number(ack.message_id)
    if number is not None:  # the number its receipts and ``/agents sent`` will name it by
        result = attrs.evolve(result, summary=f"#{number} {result.summary}")
    m = peer.manifest  # the card keeps what the outbox needs when the session is resumed
    target = f"{escape_controls(m.project)} (pid {m.pid})"
    meta = card_meta(
        ack.message_id, m.instance_id, target, message, receipts=bool(ack.receipts), number=number
    )
    return attrs.evolve(result, meta=meta)


def _send_tool(handle: RelayHandle) -> Tool:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        target, message = args["target_instance_id"], args["message"]
        peer = await check_send(handle, target, message)  # the model can fix its call
        return await send_to(handle, peer, message, ctx.hops)

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
            "was queued, so never claim that the other instance completed anything. A "
            "receiver that sends receipts reports later (agent_message_status reads them); "
            "report only what a receipt says."
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
