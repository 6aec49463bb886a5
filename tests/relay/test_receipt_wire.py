"""zcoder's extension of version 1 on the wire: ``receipt`` and ``cancel`` requests, the
``receipts`` key of an ack, the listener's dispatch, the spool's withdraw, the outbox."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.relay.test_listener import exchange
from tests.relay.wire_fakes import (
    ME,
    SENDER,
    FakeSpool,
    SenderCheck,
    ack_frame,
    enqueue_env,
    enqueue_obj,
    frame,
)
from zcoder.relay.envelope import (
    Cancel,
    Limits,
    Receipt,
    Rejected,
    decode_ack,
    decode_request,
    encode_envelope,
)
from zcoder.relay.listener import Listener, PeerCred
from zcoder.relay.outbox import Outbox
from zcoder.relay.receipt_states import MAX_DETAIL_CHARS
from zcoder.relay.spool.store import Spool

LIMITS = Limits(max_bytes=65536, max_message_chars=100)
MID = f"{ME}-3"  # a message ME sent; SENDER reports on it


def receipt_obj(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "protocol": 1,
        "type": "receipt",
        "message_id": MID,
        "target_instance_id": ME,
        "sender_instance_id": SENDER,
        "sender_pid": 42110,
        "state": "completed",
        "detail": "done",
        "changed": "a.py\nb.py",
        "created_at": 1788012245,
    }
    obj.update(changes)
    return obj


def decode(obj: dict[str, Any]) -> object:
    return decode_request(json.dumps(obj).encode(), my_instance_id=ME, limits=LIMITS)


def test_a_receipt_decodes_and_encodes_back_byte_for_byte() -> None:
    payload = json.dumps(receipt_obj(), separators=(",", ":")).encode()
    request = decode_request(payload, my_instance_id=ME, limits=LIMITS)
    assert isinstance(request, Receipt) and request.state == "completed"
    assert encode_envelope(request) == payload


@pytest.mark.parametrize(
    ("changes", "status", "why"),
    [
        ({"target_instance_id": "1-abcd"}, "wrong_target", "not this instance"),
        ({"state": "Finished!"}, "invalid", "a receipt state"),
        ({"state": "w" * 33}, "invalid", "a receipt state"),
        ({"state": 3}, "invalid", "$.state"),
        ({"detail": "x" * (MAX_DETAIL_CHARS + 1)}, "invalid", "detail"),
        ({"message_id": f"{SENDER}-1"}, "invalid", "target_instance_id"),
        ({"extra": 1}, "invalid", "extra"),
        ({"sender_pid": 7}, "invalid", "sender_pid"),
    ],
)
def test_a_bad_receipt_is_refused_in_the_spec_order(
    changes: dict[str, Any], status: str, why: str
) -> None:
    with pytest.raises(Rejected) as caught:
        decode(receipt_obj(**changes))
    assert caught.value.status == status and why in str(caught.value)


def test_a_receipt_state_this_version_does_not_know_is_read_as_a_word() -> None:
    # A newer receiver's step decodes (the outbox then ignores it): liberal in what we read.
    for state in ("waiting", "input_required", "x"):
        request = decode(receipt_obj(state=state))
        assert isinstance(request, Receipt) and request.state == state


def test_a_cancel_must_name_a_message_of_its_sender() -> None:
    obj = {
        "protocol": 1,
        "type": "cancel",
        "message_id": f"{SENDER}-1",
        "target_instance_id": ME,
        "sender_instance_id": SENDER,
        "sender_pid": 42110,
        "created_at": 1,
    }
    assert isinstance(decode(obj), Cancel)
    with pytest.raises(Rejected, match="does not start with sender_instance_id"):
        decode({**obj, "message_id": f"{ME}-1"})


def test_an_ack_carries_receipts_only_as_true() -> None:
    base = {"protocol": 1, "type": "ack", "message_id": "m", "status": "accepted"}
    assert decode_ack(json.dumps({**base, "receipts": True}).encode()).receipts is True
    for odd in (1, "true", False, None):
        assert decode_ack(json.dumps({**base, "receipts": odd}).encode()).receipts is None
    assert decode_ack(json.dumps({**base, "status": "too_late"}).encode()).status == "too_late"


def listener(spool: FakeSpool, extension: Any, check: SenderCheck | None = None) -> Listener:
    return Listener(
        instance_id=ME,
        spool=spool,
        sender_check=check or SenderCheck(),
        state=lambda: "ready",
        limits=LIMITS,
        io_timeout=2.0,
        extension=extension,
    )


PEER = PeerCred(pid=42110, uid=os.getuid(), gid=os.getgid())


async def test_without_an_extension_a_receipt_is_unsupported_like_a_version_1_peer() -> None:
    reply = await exchange(listener(FakeSpool(), None), frame(receipt_obj()), peer=PEER)
    assert reply == ack_frame(MID, "unsupported")


async def test_the_extension_decides_after_the_sender_check() -> None:
    seen: list[tuple[object, bool]] = []

    def handle(request: Receipt | Cancel, verified: bool) -> str:
        seen.append((request, verified))
        return "accepted"

    check = SenderCheck()
    check.result = False
    refused = await exchange(listener(FakeSpool(), handle, check), frame(receipt_obj()))
    assert refused == ack_frame(MID, "invalid") and seen == []
    reply = await exchange(listener(FakeSpool(), handle), frame(receipt_obj()), peer=PEER)
    assert reply == ack_frame(MID, "accepted")
    assert seen[0][1] is True


async def test_an_accepted_enqueue_says_receipts_will_come_only_with_an_extension() -> None:
    plain = await exchange(listener(FakeSpool(), None), frame(enqueue_obj()))
    assert b"receipts" not in plain
    reply = await exchange(listener(FakeSpool(), lambda r, v: "accepted"), frame(enqueue_obj()))
    assert json.loads(reply.split(b"\n", 1)[1])["receipts"] is True


async def test_withdraw_removes_a_waiting_message_and_is_too_late_for_a_claimed_one(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "relay", max_queue=4, limits=LIMITS)
    spool.create()
    first = enqueue_env()
    second = enqueue_env(message_id=f"{SENDER}-2")
    for envelope in (first, second):
        assert spool.enqueue(envelope, verified=True)[0] == "accepted"
    claimed = spool.claim()
    assert claimed is not None and claimed.envelope.message_id == first.message_id
    assert spool.withdraw(first.message_id, SENDER) == "too_late"
    assert spool.withdraw(second.message_id, "9-other") == "unknown"  # not its message
    assert spool.withdraw(second.message_id, SENDER) == "withdrawn"
    assert spool.withdraw(second.message_id, SENDER) == "withdrawn"  # a retry
    assert spool.waiting() == 0 and spool.claim() is None
    assert spool.enqueue(second, verified=True)[0] == "duplicate"  # never runs later
    assert spool.withdraw(f"{SENDER}-9", SENDER) == "unknown"
    await trio.lowlevel.checkpoint()


def test_the_outbox_takes_receipts_from_the_receiver_only_and_never_steps_back() -> None:
    now = [100.0]
    box = Outbox(clock=lambda: now[0], limit=2)
    box.record(MID, SENDER, "digest (pid 1)", "\n  fix it\nmore", receipts=True)
    assert box.get(MID) is not None and box.get(MID).first_line == "fix it"  # type: ignore[union-attr]
    assert box.apply(MID, "9-other", "completed", "", "") is None
    assert box.apply(MID, SENDER, "started", "", "") is not None
    now[0] = 160.0
    done = box.apply(MID, SENDER, "completed", "ok", "a.py")
    assert done is not None and (done.state, done.updated_at) == ("completed", 160.0)
    assert box.apply(MID, SENDER, "started", "", "") is None
    assert box.get(MID).state == "completed"  # type: ignore[union-attr]
    box.record(f"{ME}-4", SENDER, "d", "b", receipts=False)
    box.record(f"{ME}-5", SENDER, "d", "c", receipts=False)
    assert [s.message_id for s in box.entries()] == [f"{ME}-4", f"{ME}-5"]  # settled went
