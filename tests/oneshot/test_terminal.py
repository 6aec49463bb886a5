"""The one-shot mode's terminal side, in process: the approval prompt, the stream sink
(answer on stdout, activity on stderr) and the approver on ``/dev/tty``."""

from __future__ import annotations

import io
import os
import select
import time

from zcoder.approval.questions import ApprovalRequest
from zcoder.conversation import EventRole, ToolResult, TranscriptEvent
from zcoder.live import Entry, TextDelta, ThinkingDelta, ToolUpdate
from zcoder.oneshot.terminal import StreamSink, TtyApprover, approval_prompt


def _read_until(fd: int, text: str, timeout: float = 10.0) -> str:
    """What ``fd`` (a pty master) yields until ``text`` has arrived.

    One read is not enough: the pty hands the slave's output over in pieces, and under load
    the echo of the typed input can arrive alone before the prompts.
    """
    deadline = time.monotonic() + timeout
    shown = b""
    while text.encode() not in shown:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no {text!r} on the terminal, only {shown!r}")
        shown += os.read(fd, 4096)
    return shown.decode()


def test_approval_prompt_shows_exact_text_and_choices() -> None:
    req = ApprovalRequest(
        kind="command", text="rm -rf build\x1b[A", choices=("y", "n"), cwd="/w", origin="relay"
    )
    assert approval_prompt(req) == (
        "\nA relayed request wants to run this command in /w:\n    rm -rf build^[[A\n"
        "[y = yes, once, n = no] "
    )
    send = ApprovalRequest(kind="send", text="hi\nthere", choices=("y", "n"), target="beta\x1b")
    assert approval_prompt(send) == (
        "\nThe model wants to send a message to beta^[:\n    hi\n    there\n"
        "[y = yes, once, n = no] "
    )


def _sink() -> tuple[StreamSink, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return StreamSink(out, err), out, err


def _entry(role: EventRole, text: str, **meta: str) -> Entry:
    return Entry(TranscriptEvent(role=role, text=text, meta=meta))


def test_sink_streams_once_and_prints_finish_responses() -> None:
    sink, out, err = _sink()
    sink.emit(ThinkingDelta("hmm"))
    sink.emit(TextDelta("Let me "))
    sink.emit(TextDelta("look."))
    sink.emit(_entry("assistant", "Let me look."))  # already streamed: not repeated
    sink.emit(ToolUpdate("1.0", "read_file", "a.py", "pending"))
    sink.emit(ToolUpdate("1.0", "read_file", "a.py", "running"))
    sink.emit(
        ToolUpdate("1.0", "read_file", "a.py", "completed", ToolResult("", summary="2 lines"))
    )
    sink.emit(_entry("tool", "2 lines"))
    sink.emit(_entry("assistant", "Done.", finish="complete"))  # never streamed
    sink.emit(_entry("error", "boom\x1b[0m"))
    sink.close()
    assert out.getvalue() == "Let me look.\nDone.\n"
    assert err.getvalue() == (
        "hmm\n-> read_file a.py\n   read_file ok: 2 lines\nzcoder: boom^[[0m\n"
    )


def test_sink_renders_a_tool_name_visibly() -> None:
    sink, _, err = _sink()
    sink.emit(ToolUpdate("1.0", "ls\x1b[2J", "\x07", "running"))
    sink.emit(
        ToolUpdate("1.0", "ls\x1b[2J", "\x07", "failed", ToolResult("", summary="unknown tool"))
    )
    assert err.getvalue() == ("-> ls^[[2J ^G\n   ls^[[2J failed: unknown tool\n")


async def test_tty_approver_reads_the_terminal() -> None:
    master, slave = os.openpty()
    try:
        approver = TtyApprover(io.StringIO(), tty_path=os.ttyname(slave))
        os.write(master, b"what\ny\n")
        req = ApprovalRequest(kind="command", text="ls", choices=("y", "a", "n"), cwd="/w")
        assert await approver.ask(req) == "y"
        shown = _read_until(master, "Please answer y/a/n: ")
        assert "run this command in /w" in shown
    finally:
        os.close(master)
        os.close(slave)


async def test_tty_approver_without_a_terminal_denies() -> None:
    err = io.StringIO()
    approver = TtyApprover(err, tty_path="/nonexistent/tty")
    req = ApprovalRequest(kind="send", text="hi", choices=("y", "n"), target="1-2")
    assert await approver.ask(req) == "n"
    assert err.getvalue().startswith("zcoder: no terminal to ask on: denied the message")


def test_sink_holds_back_a_tool_call_printed_as_text() -> None:
    sink, out, err = _sink()
    for piece in ('```json\n{"name": "read_file", ', '"arguments": {"path": "a.py"}}\n```'):
        sink.emit(TextDelta(piece))
    assert out.getvalue() == ""
    sink.emit(ToolUpdate("1.0", "read_file", "a.py", "pending"))  # the loop ran it as a call
    sink.emit(ToolUpdate("1.0", "read_file", "a.py", "running"))
    for piece in ("{", "} is an empty ", "object."):
        sink.emit(TextDelta(piece))
    assert out.getvalue() == "{} is an empty object."
    sink.emit(_entry("assistant", "{} is an empty object."))
    sink.emit(TextDelta("```"))
    sink.emit(TextDelta("python\nx = 1\n```"))  # an ordinary code block is not held
    sink.close()
    assert out.getvalue() == "{} is an empty object.\n```python\nx = 1\n```\n"
    assert err.getvalue() == "-> read_file a.py\n"


def test_sink_prints_the_response_of_a_finish_printed_as_text() -> None:
    sink, out, _ = _sink()
    sink.emit(TextDelta('{"name": "finish", "arguments": {"status": "complete", '))
    sink.emit(TextDelta('"response": "All done."}}'))
    sink.emit(_entry("assistant", "All done.", finish="complete"))
    sink.close()
    assert out.getvalue() == "All done.\n"


def test_sink_shows_held_text_when_the_turn_ends_there() -> None:
    sink, out, _ = _sink()
    sink.emit(TextDelta('{"name": "x"'))
    sink.close()  # say, a cancelled or failed stream: what came is shown
    assert out.getvalue() == '{"name": "x"\n'
