"""The words of the inbound machine's notices and of ``/agents inbox|hold|accept|approve|deny``
(``ui/inbound_text.py``), from the typed records the machine returns."""

from __future__ import annotations

from zcoder.relay.inbound import (
    Approved,
    Denied,
    Dropped,
    Held,
    InboxRow,
    InboxView,
    ModeSet,
    Shown,
    WaitsForModel,
    Withdrawn,
)
from zcoder.ui.inbound_text import (
    Say,
    approved_line,
    denied_line,
    inbox_lines,
    mode_line,
    said,
    shown_lines,
)

NOW = 1_000_000.0


def _row(number: int, body: str, *, held: bool = True, label: str = "alpha (pid 101)") -> InboxRow:
    return InboxRow(number, held, label, True, NOW, body, f"101-a1b2c3d4-{number}")


def test_a_held_message_is_announced_with_its_number_and_why() -> None:
    assert said(Held(1, "alpha (pid 101)", "hold", None, 4)) == Say(
        "Relayed message 1 from alpha (pid 101) is held: this instance holds relayed "
        "messages. /agents show 1 reads it whole; /agents approve 1 runs it, /agents deny 1 "
        "drops it."
    )
    hops = said(Held(2, "a (pid 1)", "hops", 4, 4)).text
    assert "4 relayed turns led to it (ZCODER_RELAY_MAX_HOPS is 4)" in hops
    unverified = said(Held(3, "a (pid 1)", "unverified", None, 4)).text
    assert "its sender's peer credentials did not verify" in unverified


def test_the_other_notices() -> None:
    assert said(WaitsForModel("alpha (pid 101)")) == Say(
        "The relayed message from alpha (pid 101) did not reach the model: it stays first "
        "in the queue and runs when the model answers again."
    )
    assert said(Dropped("disk full")) == Say("disk full; it was dropped", "error")
    assert said(Withdrawn(3, "101-a1b2c3d4-3", "alpha (pid 101)")) == Say(
        "Relayed message 3 from alpha (pid 101) was withdrawn by its sender before it ran."
    )


def test_control_characters_in_a_sender_label_are_escaped() -> None:
    label = "evil\x1b[2Jname\n (pid 101)"
    for text in (
        said(Held(1, label, "hold", None, 4)).text,
        said(WaitsForModel(label)).text,
        said(Withdrawn(1, "m", label)).text,
        denied_line(Denied(1, label)),
        inbox_lines(
            InboxView("accept", False, (InboxRow(1, True, label, True, NOW, "b", "m"),), NOW)
        )[1],
    ):
        assert "\x1b" not in text and "\n" not in text
        assert "evil^[[2Jname^J (pid 101)" in text


def test_the_inbox_with_nothing_waiting() -> None:
    view = InboxView("hold", False, (), NOW)
    assert inbox_lines(view) == ["No relayed message waits (inbound policy: hold)."]


def test_the_inbox_lists_oldest_first_with_state_check_age_and_first_line() -> None:
    rows = (
        InboxRow(1, False, "alpha (pid 101)", True, NOW - 630, "  fix the build\nthen test", "m1"),
        InboxRow(2, True, "beta (pid 202)", False, NOW - 30, "x" * 100, "m2"),
    )
    lines = inbox_lines(InboxView("accept", False, rows, NOW))
    assert lines[0] == "Relayed messages waiting (inbound policy: accept):"
    assert lines[1] == (
        "  1. queued alpha (pid 101) · verified · 10 min ago · fix the build (+1 line)"
    )
    assert lines[2].startswith("  2. held   beta (pid 202) · UNVERIFIED · 30 s ago · xxx")
    assert len(lines[2]) < len("  2. held   beta (pid 202) · UNVERIFIED · 30 s ago · ") + 70
    assert len(lines) == 3


def test_the_inbox_says_when_escape_stopped_relayed_work() -> None:
    rows = (InboxRow(1, False, "a (pid 1)", True, NOW, "b", "m"),)
    assert inbox_lines(InboxView("accept", True, rows, NOW))[0] == (
        "Relayed messages waiting (inbound policy: accept; relayed work stopped: none runs "
        "until /agents resume):"
    )


def test_the_policy_switches() -> None:
    assert mode_line(ModeSet("hold", held=3, waiting=3)) == (
        "Relayed messages are held: 3 waiting; /agents inbox lists them, "
        "/agents approve N runs one."
    )
    assert mode_line(ModeSet("accept", held=2, waiting=2)) == (
        "Relayed messages run in their turn again; 2 held still wait for /agents approve N."
    )
    assert mode_line(ModeSet("accept", held=0, waiting=0)) == (
        "Relayed messages run in their turn again."
    )


def test_a_message_of_several_lines_is_shown_whole() -> None:
    body = "Tidy the docs.\nThen delete the build directory\n\nand push to\x1b[2K main\r."
    shown = shown_lines(Shown(_row(1, body), NOW))
    assert shown[0] == (
        "Relayed message 1 (held) from alpha (pid 101) · verified · just now · id 101-a1b2c3d4-1:"
    )
    assert shown[1:-1] == [
        "  Tidy the docs.",
        "  Then delete the build directory",
        "  ",
        "  and push to^[[2K main^M.",
    ]
    assert shown[-1] == "/agents approve 1 runs it, /agents deny 1 drops it."
    queued = shown_lines(Shown(_row(1, body, held=False), NOW))
    assert queued[0].startswith("Relayed message 1 (queued) from alpha")
    assert queued[-1] == "It runs in its turn (/agents deny 1 drops it)."
    approved = approved_line(Approved(_row(1, body, held=False), was_held=True))
    assert approved == (
        "Relayed message 1 from alpha (pid 101) approved: “Tidy the docs. (+3 lines)”; it "
        "runs in its turn."
    )


def test_approve_and_deny() -> None:
    assert approved_line(Approved(_row(3, "task 3", held=False), was_held=True)) == (
        "Relayed message 3 from alpha (pid 101) approved: “task 3”; it runs in its turn."
    )
    assert approved_line(Approved(_row(1, "task 1", held=False), was_held=False)) == (
        "Relayed message 1 is not held: it runs in its turn."
    )
    assert denied_line(Denied(1, "alpha (pid 101)")) == (
        "Relayed message 1 from alpha (pid 101) denied: removed without running."
    )
