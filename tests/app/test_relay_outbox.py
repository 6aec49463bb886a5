"""``RelayOutbox`` without sockets: each receipt line names its message and shows the answer
once, a repeat makes no entry, and a receiver that left shows ``gone``. (A repeated cancel
received: ``tests/relay/test_extension.py``.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.relay.wire_fakes import ME, SENDER
from zcoder.app.relay.outbox import RelayOutbox, changed_line
from zcoder.app.relay.receipts import COMMANDS_NOTE
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, RelayUnavailable
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt
from zcoder.relay.manifest import Manifest, publish_manifest
from zcoder.relay.outbox import card_meta
from zcoder.relay.paths import ensure_relay_dir, manifest_name, socket_name
from zcoder.relay.registry import receiver_gone
from zcoder.ui.render import render_event

WHO = "digest (pid 42110)"


def outbox() -> RelayOutbox:
    return RelayOutbox()


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
        box.receipt(receipt(mid, state, detail, "a.ts"))
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
    box.receipt(receipt(mid, "denied", "refused by the receiver's user"))
    (denied,) = box.take_entries()
    assert denied.meta["headline"] == (
        f'⇄ {WHO} denied your message #1 "please wait": refused by the receiver\'s user'
    )
    assert denied.text == ""


def test_a_repeat_or_a_step_back_is_accepted_and_makes_no_entry() -> None:
    box = outbox()
    mid = sent(box, 1, "task")
    states = ["held", "held", "started", *["started"] * 500, "held", "completed", "started"]
    for state in states:
        box.receipt(receipt(mid, state))
    assert [e.meta["receipt"] for e in box.take_entries()] == ["held", "started", "completed"]


def test_a_task_that_waits_for_the_receivers_user_says_why_and_then_goes_on() -> None:
    box = outbox()
    mid = sent(box, 1, "run the tests")
    why = "asks its user to approve: make test"
    for state, detail in [("started", ""), ("waiting", why), ("waiting", why)]:
        box.receipt(receipt(mid, state, detail))
    (line,) = box.sent_lines()
    assert f"→ {WHO} · waiting (asks its user to approve: make test) ·" in line
    status = box.status_text(mid)
    assert status is not None and '"state": "waiting"' in status and why in status
    box.receipt(receipt(mid, "started", "nobody answered in 2 s (counted as no)"))
    assert "· started ·" in box.sent_lines()[0]
    _, waiting, going_on = box.take_entries()  # the repeated ``waiting`` made none
    assert waiting.meta["headline"] == f'⇄ {WHO} waits on your message #1 "run the tests": {why}'
    assert going_on.meta["headline"] == (
        f'⇄ {WHO} goes on with your message #1 "run the tests": nobody answered in 2 s '
        "(counted as no)"
    )


def test_a_state_this_version_does_not_know_changes_nothing() -> None:
    box = outbox()
    mid = sent(box, 1, "task")
    box.receipt(receipt(mid, "started"))
    box.receipt(receipt(mid, "input_required", "a newer step"))
    assert [e.meta["receipt"] for e in box.take_entries()] == ["started"]
    assert "· started ·" in box.sent_lines()[0]


async def test_a_receiver_that_left_shows_gone_and_is_not_asked_to_cancel() -> None:
    box = outbox()
    mid = sent(box, 1, "task")
    done = sent(box, 2, "other")
    box.receipt(receipt(mid, "started"))
    box.receipt(receipt(done, "completed", "ok"))
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


def card(mid: str, body: str, at: float, receipts: bool = True) -> TranscriptEvent:
    """A send card as ``send_to`` and ``/send`` keep it in the session."""
    meta = {**card_meta(mid, SENDER, WHO, body, receipts=receipts), "name": "/send"}
    return TranscriptEvent(role="tool", text="accepted", at=at, meta={**meta, "state": "completed"})


def test_a_resumed_session_lists_what_it_sent_with_the_last_state_known() -> None:
    first = outbox()
    first.open_session("s1", [])
    events = [card(sent(first, n, f"task {n}"), f"task {n}", float(n)) for n in (1, 2, 3)]
    first.receipt(receipt(f"{ME}-1", "started"))
    first.receipt(receipt(f"{ME}-2", "completed", "*Done*: it works.", "a.py\nb.py"))
    first.receipt(receipt(f"{ME}-3", "failed", "no such file"))
    events += first.take_entries()
    events.insert(1, TranscriptEvent(role="relay", text="x", meta={"receipt": "started"}))
    events.append(events[0])  # a repeated card keeps its first entry and number

    again = outbox()
    again.open_session("s1", events)
    one, two, three = again.sent_lines()
    assert one.startswith(f"  1. {ME}-1 → {WHO} · started (last known: sent by an earlier run")
    assert two.startswith(f"  2. {ME}-2 → {WHO} · completed ·") and two.endswith("task 2")
    assert three.startswith(f"  3. {ME}-3 → {WHO} · failed ·")
    status = again.status_text(f"{ME}-2")
    assert status is not None
    record = json.loads(status)
    assert (record["detail"], record["changed"]) == ("*Done*: it works.", ["a.py", "b.py"])
    failed = json.loads(again.status_text(f"{ME}-3") or "")
    assert failed["detail"] == "no such file"
    assert "earlier run" in (again.status_text(f"{ME}-1") or "")


async def test_an_earlier_runs_message_is_not_cancelled_from_here() -> None:
    box = outbox()
    box.open_session("s1", [card(f"{ME}-1", "task", 1.0)])

    async def deliver(path: Path, request: Cancel) -> Ack:
        raise AssertionError("nothing is sent")

    with pytest.raises(CommandError, match=r'#1 "task" was sent by an earlier run'):
        await box.cancel("1", me=ME, socket_of=Path, deliver=deliver)


def test_each_session_has_its_own_sent_list_and_receipts_still_reach_the_others() -> None:
    box = outbox()
    box.open_session("s1", [])
    mid = sent(box, 1, "in s1")
    box.open_session("s2", [])
    assert box.sent_lines()[0].startswith("No messages sent in this session yet (1 sent from")
    box.receipt(receipt(mid, "completed", "done"))
    (entry,) = box.take_entries()  # shown where the user is
    assert entry.meta["receipt"] == "completed"
    other = sent(box, 2, "in s2")
    # Its number is its id's counter: #2 beside …-2, never a second #1 beside another id.
    assert box.outbox.get(other) is not None and box.outbox.get(other).number == 2  # type: ignore[union-attr]
    box.open_session("s1", [])  # kept in memory: not rebuilt from (an empty) transcript
    line, elsewhere = box.sent_lines()
    assert line.startswith(f"  1. {mid} → {WHO} · completed ·")
    assert elsewhere == "(1 sent from other sessions of this run: /sessions N switches to one)"


def test_a_long_first_line_is_cut_with_an_ellipsis_in_the_list() -> None:
    box = outbox()
    sent(box, 1, "explain why each of the failing tests fails and what would fix it, in order")
    (line,) = box.sent_lines()
    assert line.endswith(" · explain why each of the failing tests fails and what would…")


def test_changed_says_when_no_file_was_edited() -> None:
    assert changed_line("a.py\nb.py") == "Changed: a.py, b.py"
    assert changed_line(f"a.py\n{COMMANDS_NOTE}") == f"Changed: a.py {COMMANDS_NOTE}"
    assert changed_line(COMMANDS_NOTE) == (
        "No file edited; commands ran too: what they changed is not known"
    )
    assert changed_line("") == ""


def test_a_receipts_answer_is_rendered_as_markdown_and_its_paths_as_written() -> None:
    box = outbox()
    mid = sent(box, 1, "fix the test")
    answer = "*I'm about to fix the test*\n\n- **one** thing"
    box.receipt(receipt(mid, "completed", answer, "my__init__.py"))
    (entry,) = box.take_entries()
    fragments = render_event(entry, width=80)
    drawn = "".join(part[1] for part in fragments)
    assert "*" not in drawn.replace("my__init__.py", "")
    assert "I'm about to fix the test" in drawn
    assert any("md.em" in style and "about" in text for style, text, *_ in fragments)
    assert drawn.endswith("  │ Changed: my__init__.py\n")


def test_a_number_is_its_ids_counter_and_a_resumed_card_keeps_it() -> None:
    box = outbox()
    mid = sent(box, 7, "the seventh id")
    assert box.find("7").message_id == mid and box.find("#7").message_id == mid
    with pytest.raises(CommandError, match="no message '#1' was sent"):
        box.find("#1")
    meta = {**card_meta(mid, SENDER, WHO, "the seventh id", receipts=True, number=7)}
    resumed = outbox()
    resumed.open_session("s", [TranscriptEvent(role="tool", text="#7 accepted", meta=meta)])
    assert resumed.find("#7").message_id == mid
    assert resumed.outbox.last_number == 7


def test_an_empty_sent_list_names_what_other_sessions_of_this_run_sent() -> None:
    box = outbox()
    box.open_session("s1", [])
    sent(box, 1, "in s1")
    sent(box, 2, "also in s1")
    box.open_session("s2", [])
    assert box.sent_lines() == [
        "No messages sent in this session yet (2 sent from other sessions of this run: "
        "/sessions N switches to one)."
    ]
    sent(box, 3, "in s2")
    lines = box.sent_lines()
    assert lines[0].startswith("  3. ") and lines[-1].startswith("(2 sent from other")


def test_ages_in_one_list_use_one_unit_rule() -> None:
    from zcoder.text.ages import age

    assert [age(s) for s in (0, 12, 59, 72, 95, 3599, 3600, 172800)] == [
        "just now",
        "12 s ago",
        "59 s ago",
        "1 min ago",
        "1 min ago",
        "59 min ago",
        "1 h ago",
        "2 days ago",
    ]


async def test_a_withdrawn_message_is_said_to_be_removed_on_your_cancel() -> None:
    box = outbox()
    sent(box, 1, "rename it")

    async def deliver(path: Path, request: Cancel) -> Ack:
        return Ack(1, "ack", request.message_id, "withdrawn")

    line = await box.cancel("#1", me=ME, socket_of=Path, deliver=deliver)
    assert line.startswith(f"Withdrawn: {WHO} removed message ")
    (entry,) = box.take_entries()
    assert entry.meta["headline"] == (
        f'⇄ {WHO} removed your message #1 "rename it" from its queue: you withdrew it '
        "(/agents cancel) before it ran"
    )
    assert "this instance" not in entry.meta["headline"]


def test_a_receiver_that_left_holding_a_message_is_told_once() -> None:
    box = outbox()
    box.open_session("s1", [])
    held = sent(box, 1, "held there")
    box.receipt(receipt(held, "held", "it holds every relayed message"))
    done = sent(box, 2, "done there")
    box.receipt(receipt(done, "completed", "ok"))
    box.take_entries()
    assert box.waits_on_others()
    asked: list[str] = []

    def gone(instance_id: str) -> bool:
        asked.append(instance_id)
        return True

    assert box.departed(gone) is True
    (entry,) = box.take_entries()
    assert entry.meta["headline"] == (
        f'⇄ {WHO} is gone, holding your message #1 "held there" for its user: it exited '
        "without reporting how the message ended, so whether it ran is not known"
    )
    assert asked == [SENDER]  # once per receiver, only for an unsettled message
    assert box.departed(gone) is False and box.take_entries() == []  # told once
    assert not box.waits_on_others()
    assert "· gone ·" in box.sent_lines(gone)[0]


def test_a_receiver_still_there_is_not_told_gone() -> None:
    box = outbox()
    box.open_session("s1", [])
    sent(box, 1, "queued there")
    assert box.departed(lambda instance_id: False) is False
    assert box.take_entries() == [] and box.waits_on_others()
