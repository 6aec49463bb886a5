"""Test and bench helpers for the relay."""

from __future__ import annotations

from zcoder.relay.envelope import Enqueue

__all__ = ["make_enqueue"]


def make_enqueue(
    message_id: str,
    *,
    body: str = "do the task",
    target: str = "2-efgh",
    sender: str = "1-abcd",
    project: str = "sender",
    workspace: str = "/work/sender",
    created_at: int = 1788012245,
) -> Enqueue:
    """An ``enqueue`` envelope; the sender pid is the sender id's prefix."""
    return Enqueue(
        protocol=1,
        type="enqueue",
        message_id=message_id,
        target_instance_id=target,
        sender_instance_id=sender,
        sender_pid=int(sender.split("-", 1)[0]),
        sender_project=project,
        sender_workspace=workspace,
        body=body,
        created_at=created_at,
    )
