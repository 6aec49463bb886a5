"""Test doubles for the wire tests: an in-memory spool, a sender check, frame builders."""

from __future__ import annotations

import json
from typing import Any

from zcoder.errors import RelayError
from zcoder.relay.envelope import Enqueue, Limits
from zcoder.relay.listener import Listener

ME = "42302-18473291"
SENDER = "42110-18471001"


class FakeSpool:
    """Decides duplicate, paused, full, accepted (in that order) and remembers what it got."""

    def __init__(self, *, max_queue: int = 16) -> None:
        self.max_queue = max_queue
        self.paused = False
        self.fail = False
        self.items: list[tuple[Enqueue, bool]] = []

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]:
        if self.fail:
            raise RelayError("the disk is full")
        if any(env.message_id == envelope.message_id for env, _ in self.items):
            return "duplicate", None
        if self.paused:
            return "paused", None
        if len(self.items) >= self.max_queue:
            return "full", None
        self.items.append((envelope, verified))
        return "accepted", len(self.items)


class SenderCheck:
    """Counts its calls; answers ``self.result``."""

    def __init__(self) -> None:
        self.result = True
        self.calls = 0

    def __call__(self, envelope: object) -> bool:
        self.calls += 1
        return self.result


def make_listener(
    spool: FakeSpool | None = None,
    check: SenderCheck | None = None,
    *,
    io_timeout: float = 2.0,
    max_connections: int = 32,
    limits: Limits | None = None,
) -> Listener:
    return Listener(
        instance_id=ME,
        spool=spool if spool is not None else FakeSpool(),
        sender_check=check if check is not None else SenderCheck(),
        state=lambda: "ready",
        limits=limits if limits is not None else Limits(max_bytes=4096, max_message_chars=100),
        io_timeout=io_timeout,
        max_connections=max_connections,
    )


def enqueue_obj(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "protocol": 1,
        "type": "enqueue",
        "message_id": f"{SENDER}-1",
        "target_instance_id": ME,
        "sender_instance_id": SENDER,
        "sender_pid": 42110,
        "sender_project": "user-profiles",
        "sender_workspace": "/work/app/services/user-profiles",
        "body": "Update weeklyDigest.ts for users.display_name.",
        "created_at": 1788012245,
    }
    obj.update(changes)
    return obj


def enqueue_env(**changes: Any) -> Enqueue:
    return Enqueue(**enqueue_obj(**changes))


def ping_obj(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "protocol": 1,
        "type": "ping",
        "message_id": "p1",
        "target_instance_id": ME,
        "sender_instance_id": SENDER,
    }
    obj.update(changes)
    return obj


def frame(obj: Any) -> bytes:
    """The frame our encoder would write for ``obj`` (compact JSON, UTF-8)."""
    payload = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return b"ZCODER-AGENT/1 %d\n%s" % (len(payload), payload)


def ack_frame(message_id: str, status: str, **extra: Any) -> bytes:
    fields = {"protocol": 1, "type": "ack", "message_id": message_id, "status": status}
    return frame({**fields, **extra})
