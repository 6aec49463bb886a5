"""Key handling of the terminal app, headless (pipe input + DummyOutput), and the approval
guard. App tests are plain sync functions around ``asyncio.run`` (prompt_toolkit's loop);
the approval guard is tested under pytest-trio with a fake clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from zcoder.approval.questions import ApprovalRequest
from zcoder.ui.approval import GUARD, ApprovalLine, count_rows, full_text
from zcoder.ui.events import CancelTurn, ExitRequest, Submit, UiEvent
from zcoder.ui.history import PromptHistory
from zcoder.ui.status import Status
from zcoder.ui.terminal import Terminal

Steps = Callable[[Terminal, PipeInput, list[UiEvent]], Awaitable[None]]


async def wait_until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20  # only a hung test waits this long
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def drive(steps: Steps, *, history: PromptHistory | None = None) -> list[UiEvent]:
    events: list[UiEvent] = []

    async def main() -> None:
        with create_pipe_input() as inp:
            terminal = Terminal(
                status=Status(model="m", profile="coding"),
                post=events.append,
                schedule=lambda f: f(),
                complete=lambda text: [c for c in ("/model", "/mouse") if c.startswith(text)],
                history=history,
                input=inp,
                output=DummyOutput(),
            )
            task = asyncio.create_task(terminal.app.run_async(handle_sigint=False))
            await wait_until(lambda: terminal.app.is_running)
            try:
                await steps(terminal, inp, events)
            finally:
                terminal.app.exit()
                await task

    asyncio.run(main())
    return events


def test_enter_submits_and_clears_empty_enter_does_nothing() -> None:
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("\r")
        inp.send_text("hello\r")
        await wait_until(lambda: bool(events))
        assert t.buffer.text == ""

    assert drive(steps) == [Submit("hello")]


def test_newline_keys_do_not_submit() -> None:
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("a\x1b\rb\nc\x1b[13;2ud\x1b[27;2;13~e")
        await wait_until(lambda: t.buffer.text.endswith("e"))
        assert events == []
        inp.send_text("\r")
        await wait_until(lambda: bool(events))

    assert drive(steps) == [Submit("a\nb\nc\nd\ne")]


def test_keys_that_look_like_a_mouse_report_are_text_and_reports_are_dropped() -> None:
    # prompt_toolkit reads an unbracketed ESC[31m as a mouse event and its handler raised
    # (the app crashed); mouse reporting is never on here, so the keys are kept as typed.
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("a\x1b[31mX")
        await wait_until(lambda: t.buffer.text.endswith("X"))
        inp.send_text("\x1b[<0;12;5M\x1b[32;12;5M!")  # real reports: nothing typed
        await wait_until(lambda: t.buffer.text.endswith("!"))
        inp.send_text("\r")
        await wait_until(lambda: bool(events))

    assert drive(steps) == [Submit("a\x1b[31mX!")]


def test_escape_cancels_only_while_a_turn_runs_and_alt_keys_still_work() -> None:
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        keys = t.app.key_processor
        pressed: list[object] = []
        keys.after_key_press += pressed.append
        inp.send_text("one two")
        inp.send_text("\x1b")
        # Handled, not just read: the eight keys went in, and the Escape, which waits to
        # see whether a key follows it (Alt+key), has left the buffer (a slow machine must
        # not see it after the turn started below).
        await wait_until(lambda: len(pressed) == 8 and not keys.key_buffer)
        assert events == []
        t.status.turn_running = True
        inp.send_text("\x1bb")  # Alt+B: back one word
        await wait_until(lambda: t.buffer.cursor_position == 4)
        assert events == []
        inp.send_text("\x1b")
        await wait_until(lambda: bool(events))
        assert t.buffer.text == "one two"  # the draft is kept

    assert drive(steps) == [CancelTurn()]


def test_tab_completes_slash_commands() -> None:
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("/mod\t")
        await wait_until(lambda: t.buffer.text == "/model")
        inp.send_text("\x15/\t")  # Ctrl-U, then a prefix of both: the common part first
        await wait_until(lambda: t.buffer.text == "/mo")
        inp.send_text("\t")
        await wait_until(lambda: t.buffer.text == "/model")
        inp.send_text("\t")
        await wait_until(lambda: t.buffer.text == "/mouse")
        assert events == []

    drive(steps)


def test_ctrl_c_clears_then_exits_and_ctrl_d_exits_on_empty_input() -> None:
    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("draft\x03")
        await wait_until(lambda: t.buffer.text == "")
        assert events == []
        inp.send_text("xy\x1b[D\x04")  # Left, Ctrl-D: deletes a character, no exit
        await wait_until(lambda: t.buffer.text == "x")
        assert events == []
        inp.send_text("\x7f\x04")
        await wait_until(lambda: len(events) == 1)
        inp.send_text("\x03")
        await wait_until(lambda: len(events) == 2)

    assert drive(steps) == [ExitRequest("user"), ExitRequest("user")]


def test_keys_go_to_an_open_question_not_to_the_input() -> None:
    pressed: list[str] = []

    async def steps(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        def press(key: str) -> bool:
            pressed.append(key)
            return True

        t.approval.press = press  # type: ignore[method-assign]
        t.approval.request = ApprovalRequest("command", "ls", ("y", "n"))
        inp.send_text("xyz\r")
        inp.send_text("\x03")
        await wait_until(lambda: len(pressed) == 2)
        inp.send_text("\x1b")
        await wait_until(lambda: len(pressed) == 3)
        assert t.buffer.text == ""
        assert events == []

    drive(steps)
    assert pressed == ["y", "escape", "escape"]


def test_history_is_kept_across_runs(tmp_path: Path) -> None:
    path = tmp_path / "home" / "history"

    async def first(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        inp.send_text("one\rtwo\x1b\rlines\r")
        await wait_until(lambda: len(events) == 2)

    drive(first, history=PromptHistory(path))
    assert path.stat().st_mode & 0o777 == 0o600

    async def second(t: Terminal, inp: PipeInput, events: list[UiEvent]) -> None:
        await wait_until(lambda: len(t.buffer.history.get_strings()) == 2)
        inp.send_text("\x1b[A")
        await wait_until(lambda: t.buffer.text == "two\nlines")

    drive(second, history=PromptHistory(path))


def test_history_skips_broken_lines_and_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "history"
    path.write_text('"a"\nnot json\n' + "".join(f'"{i}"\n' for i in range(1100)))
    strings = list(PromptHistory(path).load_history_strings())
    assert len(strings) == 1000
    assert strings[0] == "1099"
    assert len(path.read_text().splitlines()) == 1000


# -- the approval guard (Trio) ------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_key_counts_only_after_the_question_is_seen_and_a_pause() -> None:
    clock = FakeClock()
    line = ApprovalLine(lambda f: f(), lambda: None, clock)
    request = ApprovalRequest("command", "rm -rf build", ("y", "a", "n"), cwd="/w")
    answers: list[str] = []

    async def ask() -> None:
        answers.append(await line.ask(request))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert line.is_open
        line.note_key()
        assert not line.press("y")  # typed before the question was drawn
        line.mark_rendered()
        clock.now += 0.1
        line.note_key()
        assert not line.press("y")  # the question is not on screen long enough
        clock.now += GUARD
        line.note_key()
        assert not line.press("a")  # still part of a typing burst
        assert line.ignored == 3
        clock.now += GUARD + 0.01
        line.note_key()
        assert line.press("a")
    assert answers == ["a"]
    assert not line.is_open


async def test_a_configured_guard_replaces_the_default() -> None:
    """With no guard (``ZCODER_APPROVAL_GUARD_MS=0``) a key answers once the question is
    drawn, never before; a longer guard holds a key back for that long."""
    request = ApprovalRequest("command", "make", ("y", "n"), cwd="/w")
    for guard, wait, answered in ((0.0, 0.0, True), (1.0, GUARD + 0.01, False)):
        clock = FakeClock()
        line = ApprovalLine(lambda f: f(), lambda: None, clock, guard=guard)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(line.ask, request)
            await trio.testing.wait_all_tasks_blocked()
            line.note_key()
            assert not line.press("y")  # not drawn yet: no guard lets that answer
            line.mark_rendered()
            clock.now += wait
            line.note_key()
            assert line.press("y") is answered
            if not answered:
                line.press("escape")
    with pytest.raises(ValueError, match="must be 0 or more"):
        ApprovalLine(lambda f: f(), lambda: None, FakeClock(), guard=-0.1)


async def test_escape_and_n_deny_at_once_and_unoffered_choices_do_nothing() -> None:
    clock = FakeClock()
    line = ApprovalLine(lambda f: f(), lambda: None, clock)
    answers: list[str] = []

    async def ask(request: ApprovalRequest) -> None:
        answers.append(await line.ask(request))

    for key in ("escape", "N"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, ApprovalRequest("command", "ls", ("y", "n"), origin="relay"))
            await trio.testing.wait_all_tasks_blocked()
            line.mark_rendered()
            clock.now += 1
            assert not line.press("a")  # not offered here (as in sysadmin)
            shown = "".join(t for _, t, *_ in line.render()).replace("\u00a0", " ")
            assert shown.endswith("(Esc = no)  · [a] is not offered here")
            assert line.press(key)
    assert answers == ["n", "n"]


async def test_ctrl_d_during_a_question_says_to_answer_first() -> None:
    line = ApprovalLine(lambda f: f(), lambda: None, FakeClock())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, ApprovalRequest("command", "ls", ("y", "n")))
        await trio.testing.wait_all_tasks_blocked()
        assert not line.press("c-d")  # neither an answer nor silence
        shown = "".join(t for _, t, *_ in line.render()).replace("\u00a0", " ")
        assert shown.endswith("(Esc = no)  · answer first: Ctrl-D quits after the question")
        line.press("escape")


async def test_question_text_is_shown_exactly_and_safely() -> None:
    line = ApprovalLine(lambda f: f(), lambda: None, FakeClock())
    request = ApprovalRequest("command", "echo hi\x1b[2J\nls", ("y", "n"), cwd="/w")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, request)
        await trio.testing.wait_all_tasks_blocked()
        text = "".join(t for _, t, *_ in line.render()).replace("\u00a0", " ")
        assert text == (
            "╭ The model wants to run this command in /w:\n"
            "│ echo hi^[[2J\n│ ls\n"
            "╰ [y] yes, once   [n] no   (Esc = no)"
        )
        line.press("escape")
    assert line.render() == []


async def test_a_relayed_question_names_its_sender_and_says_a_approves_one_command() -> None:
    clock = FakeClock()
    line = ApprovalLine(lambda f: f(), lambda: None, clock)
    request = ApprovalRequest(
        "command",
        "make",
        ("y", "a", "n"),
        origin="relay",
        cwd="/w",
        sender="weekly-digest\x1b[2J (pid 42302)",
        a_grants=False,
    )
    answers: list[str] = []

    async def ask() -> None:
        answers.append(await line.ask(request))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        text = "".join(t for _, t, *_ in line.render(30, 200)).replace("\u00a0", " ")
        assert text == (
            "╭ A relayed request from weekly-digest^[[2J (pid 42302) wants to run this command "
            "in /w:\n"
            "│ make\n"
            "╰ [y] yes, once   [a] yes, this command only (a relayed request gets no grant)   "
            "[n] no   (Esc = no)"
        )
        line.mark_rendered()
        clock.now += 1
        line.note_key()
        clock.now += 1
        assert line.press("a")  # offered: it answers this question
    assert answers == ["a"]


async def test_a_relayed_send_question_names_its_sender() -> None:
    line = ApprovalLine(lambda f: f(), lambda: None, FakeClock())
    request = ApprovalRequest(
        "send", "done", ("y", "n"), origin="relay", target="alpha · 1-2", sender="alpha (pid 1)"
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, request)
        await trio.testing.wait_all_tasks_blocked()
        head = "".join(t for _, t, *_ in line.render(30, 200)).split("\n")[0]
        assert (
            head
            == "╭ A relayed request from alpha (pid 1) wants to send a reply back to alpha · 1-2:"
        )
        line.press("escape")


async def test_a_question_too_long_for_the_screen_keeps_its_choices_and_prints_in_full() -> None:
    printed: list[str] = []

    def keep(fragments: StyleAndTextTuples) -> None:
        printed.append("".join(t for _, t, *_ in fragments))

    line = ApprovalLine(lambda f: f(), lambda: None, FakeClock(), keep)
    command = "\n".join(f"echo {n}" for n in range(30))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, ApprovalRequest("command", command, ("y", "n"), cwd="/w"))
        await trio.testing.wait_all_tasks_blocked()
        shown = "".join(t for _, t, *_ in line.render(10, 80)).replace("\u00a0", " ").split("\n")
        assert len(shown) == 10  # exactly the rows it was given
        assert shown == [
            "╭ The model wants to run this command in /w:",
            "│ echo 0",
            "│ echo 1",
            "│ echo 2",
            "│ ⋮ 23 more lines; the whole command is printed above",
            "│ echo 26",
            "│ echo 27",
            "│ echo 28",
            "│ echo 29",
            "╰ [y] yes, once   [n] no   (Esc = no)",
        ]
        line.render(10, 80)  # drawn again: printed once only
        assert printed == [
            "╭ The whole command of the question below (30 lines):\n"
            + "".join(f"│ echo {n}\n" for n in range(30))
        ]
        assert "".join(t for _, t, *_ in line.render(40, 80)).count("│ echo") == 30
        tiny = "".join(t for _, t, *_ in line.render(2, 80))  # never a negative count
        assert "⋮ 28 more lines" in tiny and tiny.count("│ echo") == 2
        line.press("escape")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, ApprovalRequest("command", "a\nb", ("y", "n"), cwd="/w"))
        await trio.testing.wait_all_tasks_blocked()
        assert "".join(t for _, t, *_ in line.render(2, 80)).count("│ ") == 2  # shown whole
        line.press("escape")


def test_long_lines_of_a_question_continue_on_framed_rows() -> None:
    request = ApprovalRequest("command", "x" * 10 + "\x1b", ("y", "n"))
    text = "".join(t for _, t, *_ in full_text(request, 8))
    assert text.split("\n")[1:] == ["│ xxxxxx", "│ xxxx^[", ""]
    assert count_rows([("", "abcdef\nab\n")], 4) == 3


async def test_question_head_and_choices_wrap_at_words_inside_the_frame() -> None:
    line = ApprovalLine(lambda f: f(), lambda: None, FakeClock())
    target = "beta (pid 7, /w/beta) · 7-56926070"
    request = ApprovalRequest("send", "hello", ("y", "a", "n"), target=target)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(line.ask, request)
        await trio.testing.wait_all_tasks_blocked()
        text = "".join(t for _, t, *_ in line.render(30, 48))
        assert text.replace("\u00a0", " ").split("\n") == [
            "╭ The model wants to send a message to beta (pid",
            "│ 7, /w/beta) · 7-56926070:",
            "│ hello",
            "╰ [y] yes, once   [a] yes, and allow all",
            "  commands in this conversation   [n] no",
            "  (Esc = no)",
        ]
        line.press("escape")
