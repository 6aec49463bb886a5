"""``RelayOutbox`` without sockets: each receipt line names its message and shows the answer
once, a repeat makes no entry, a repeated cancel draws one notice and one receipt, and a
receiver that left shows ``gone``."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest

from tests.relay.wire_fakes import ME, SENDER
from zcoder.app.relay.outbox import RelayOutbox
from zcoder.errors import RelayUnavailable
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt
from zcoder.relay.manifest import Manifest, publish_manifest
from zcoder.relay.paths import ensure_relay_dir, manifest_name, socket_name
from zcoder.relay.registry import receiver_gone
from zcoder.ui.render import render_event

WHO = "digest (pid 42110)"


class Receipts:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, message: Any, state: str, detail: str = "", changed: str = "") -> None:
        self.sent.append((message.message_id, state))


class Spool:
    def withdraw(self, message_id: str, sender_instance_id: str) -> str:
        return "withdrawn"  # as the real spool answers a repeated cancel


def outbox(receipts: Receipts | None = None) -> RelayOutbox:
    return RelayOutbox(receipts=cast(Any, receipts or Receipts()), spool=lambda: cast(Any, Spool()))


def sent(box: RelayOutbox, n: int, body: str, receipts: bool = True) -> str:
    mid = f"{ME}-{n}"
    envelope = Enqueue(1, "enqueue", mid, SENDER, ME, 42302, "", "/w", body, 0)
    box.record(envelope, Ack(1, "ack", mid, "accepted", receipts=receipts or None), WHO)
    return mid


def receipt(mid: str, state: str, detail: str = "", changed: str = "") -> Receipt:
    return Receipt(1, "receipt", mid, ME, SENDER, 42110, state, detail, changed, 0)


def test_each_line_names_its_message_and_a_completed_one_shows_its_answer_once() -> None:
    box = outbox()
    sent(box, 1, "first")
    mid = sent(box, 2, "update weeklyDigest.ts so the totals use the new rates\nmore")
    for state, detail in [("started", ""), ("completed", "Updated it.\nTests pass.")]:
        assert box.handle(receipt(mid, state, detail, "a.ts"), verified=True) == "accepted"
    started, completed = box.take_entries()
    name = '#2 "update weeklyDigest.ts so the totals us…"'
    assert started.meta["headline"] == f"⇄ {WHO} started your message {name}"
    assert completed.meta["headline"] == f"⇄ {WHO} completed your message {name}"
    drawn = "".join(part[1] for part in render_event(completed, width=120))
    assert drawn.count("Updated it.") == 1
    assert drawn.endswith("  │ Updated it.\n  │ Tests pass.\n  │ Changed: a.ts\n")


def test_a_short_outcome_says_which_message_and_why_in_the_headline() -> None:
    box = outbox()
    mid = sent(box, 1, "please wait")
    box.handle(receipt(mid, "denied", "refused by the receiver's user"), verified=True)
    (denied,) = box.take_entries()
    assert denied.meta["headline"] == (
        f'⇄ {WHO} denied your message #1 "please wait": refused by the receiver\'s user'
    )
    assert denied.text == ""


def test_a_repeat_or_a_step_back_is_accepted_and_makes_no_entry() -> None:
    box = outbox()
    mid = sent(box, 1, "task")
    states = ["held", "held", "started", *["started"] * 500, "held", "completed", "started"]
    assert {box.handle(receipt(mid, s), verified=True) for s in states} == {"accepted"}
    assert [e.meta["receipt"] for e in box.take_entries()] == ["held", "started", "completed"]


def test_a_repeated_cancel_is_answered_the_same_with_one_notice_and_one_receipt() -> None:
    receipts = Receipts()
    box = outbox(receipts)
    cancel = Cancel(1, "cancel", f"{SENDER}-7", ME, SENDER, 42110, 0)
    assert {box.handle(cancel, verified=True) for _ in range(500)} == {"withdrawn"}
    assert receipts.sent == [(f"{SENDER}-7", "cancelled")]
    (notice,) = box.take_entries()
    assert "withdrawn by its sender" in notice.text


async def test_a_receiver_that_left_shows_gone_and_is_not_asked_to_cancel() -> None:
    box = outbox()
    mid = sent(box, 1, "task")
    done = sent(box, 2, "other")
    box.handle(receipt(mid, "started"), verified=True)
    box.handle(receipt(done, "completed", "ok"), verified=True)
    asked: list[str] = []

    def gone(instance_id: str) -> bool:
        asked.append(instance_id)
        return True

    one, two = box.sent_lines(gone)
    assert f"→ {WHO} · gone ·" in one and f"→ {WHO} · completed ·" in two
    assert asked == [SENDER]  # once per receiver, and only for unsettled messages
    assert "· started ·" in box.sent_lines()[0]  # nobody looked
    status = box.status_text(mid, gone)
    assert status is not None and '"state": "gone"' in status
    assert "exited without reporting" in status

    async def deliver(path: Path, request: Cancel) -> Ack:
        raise AssertionError("a gone receiver is not connected to")

    with pytest.raises(RelayUnavailable, match=r'the receiver is gone: .* #1 "task"'):
        await box.cancel("1", me=ME, socket_of=Path, deliver=deliver, gone=gone)


def _manifest(relay_dir: Path, pid: int) -> str:
    instance_id = f"{pid}-18470001"
    publish_manifest(
        relay_dir / manifest_name(instance_id),
        Manifest(
            1,
            instance_id,
            pid,
            "p",
            "/w",
            "",
            "",
            "",
            str(relay_dir / socket_name(instance_id)),
            "ready",
            int(time.time()),
        ),
    )
    return instance_id


def test_gone_means_no_manifest_or_a_dead_process(short_tmp: Path) -> None:
    relay_dir = ensure_relay_dir(short_tmp / "agents")
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: its pid names nobody now
    live, dead = _manifest(relay_dir, os.getpid()), _manifest(relay_dir, child.pid)
    gone = receiver_gone(relay_dir)
    assert not gone(live)
    assert gone(dead)
    assert gone(f"{os.getpid()}-99999999")  # no manifest
