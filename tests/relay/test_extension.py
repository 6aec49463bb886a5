"""zcoder's extension answered in the relay package (``ExtensionIntake``): a receipt is taken
only from the verified receiver of a message this instance sent; a sender's cancel
withdraws its waiting message in the spool, which records it as news (``Withdrawn``) once,
however often the cancel is repeated."""

from __future__ import annotations

from pathlib import Path

from tests.relay.test_spool import new_spool
from tests.relay.wire_fakes import ME, SENDER, enqueue_env
from zcoder.relay.changes import Changes
from zcoder.relay.envelope import Cancel, Receipt
from zcoder.relay.extension import ExtensionIntake
from zcoder.relay.spool.store import Arrived, Spool, Withdrawn

RECEIVER = "42999-18479999"


def receipt(mid: str, state: str, sender: str = RECEIVER) -> Receipt:
    return Receipt(1, "receipt", mid, ME, sender, int(sender.split("-")[0]), state, "", "", 0)


def intake(spool: Spool | None = None) -> tuple[ExtensionIntake, Changes]:
    changes = Changes()
    return ExtensionIntake(spool=lambda: spool, changes=changes), changes


def test_a_receipt_is_taken_only_from_the_receiver_a_message_was_sent_to() -> None:
    box, changes = intake()
    mid = f"{ME}-1"
    assert box.handle(receipt(mid, "started"), verified=True) == "invalid"  # never sent
    box.expect(mid, RECEIVER)
    box.confirm(mid, stored=True)
    assert box.handle(receipt(mid, "started"), verified=False) == "invalid"
    assert box.handle(receipt(mid, "started", sender=SENDER), verified=True) == "invalid"
    assert changes.count == 0 and box.take_receipts() == []
    assert box.handle(receipt(mid, "started"), verified=True) == "accepted"
    assert box.handle(receipt(mid, "started"), verified=True) == "accepted"  # a repeat too
    assert changes.count == 2
    assert [r.state for r in box.take_receipts()] == ["started", "started"]
    assert box.take_receipts() == []


def test_a_repeated_cancel_withdraws_once_and_is_answered_the_same(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    mid = f"{SENDER}-7"
    assert spool.enqueue(enqueue_env(message_id=mid), verified=True)[0] == "accepted"
    box, _ = intake(spool)
    cancel = Cancel(1, "cancel", mid, ME, SENDER, 42110, 0)
    assert box.handle(cancel, verified=False) == "invalid"
    before = spool.changes.count
    assert {box.handle(cancel, verified=True) for _ in range(50)} == {"withdrawn"}
    assert spool.changes.count == before + 1  # noted once
    news = spool.take_news()
    assert [type(n) for n in news] == [Arrived, Withdrawn]
    assert news[1] == Withdrawn(mid)
    assert spool.depth() == 0


def test_a_cancel_of_another_senders_message_or_without_a_spool(short_tmp: Path) -> None:
    spool = new_spool(short_tmp)
    mid = f"{SENDER}-7"
    spool.enqueue(enqueue_env(message_id=mid), verified=True)
    box, _ = intake(spool)
    other = Cancel(1, "cancel", f"{RECEIVER}-7", ME, RECEIVER, 42999, 0)
    assert box.handle(other, verified=True) == "unknown"  # none of its own waits here
    claimed = spool.claim()
    assert claimed is not None
    assert box.handle(Cancel(1, "cancel", mid, ME, SENDER, 42110, 0), verified=True) == "too_late"
    none, _ = intake(None)
    assert none.handle(Cancel(1, "cancel", mid, ME, SENDER, 42110, 0), verified=True) == "unknown"


def test_a_receipt_before_the_ack_is_held_until_the_send_is_confirmed() -> None:
    # A quick receiver stores the message, writes its ack and says "held" at once: the
    # receipt may reach the listener before the sending task has read that ack.
    box, changes = intake()
    mid = f"{ME}-1"
    box.expect(mid, RECEIVER)  # as the send goes out
    assert box.handle(receipt(mid, "held"), verified=True) == "accepted"
    assert box.take_receipts() == []  # not before the sender has recorded the message
    box.confirm(mid, stored=True)
    assert changes.count == 2  # the receipt's, then the confirmation's: the app looks again
    assert [r.state for r in box.take_receipts()] == ["held"]
    assert box.handle(receipt(mid, "started"), verified=True) == "accepted"
    assert [r.state for r in box.take_receipts()] == ["started"]


def test_a_send_that_was_not_stored_takes_no_receipts() -> None:
    box, _ = intake()
    mid = f"{ME}-1"
    box.expect(mid, RECEIVER)
    assert box.handle(receipt(mid, "held"), verified=True) == "accepted"
    box.confirm(mid, stored=False)  # refused, or the send failed
    assert box.take_receipts() == []
    assert box.handle(receipt(mid, "started"), verified=True) == "invalid"
