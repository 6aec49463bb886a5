"""zcoder in a real pty: turns, tool approval, Escape, typing while a turn runs.

Black-box: a fake Ollama process replays a script, keys go into the pty, the pyte screen is
read back, and the fake's recorded requests show what the app sent.
"""

from __future__ import annotations

import time

import pytest

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    QUEUED,
    SLEEP_COMMAND,
    STOPPED,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    messages_of,
    script,
    sleep_pid,
    status_line,
    submit,
    text_response,
    wait_ready,
    wait_requests,
)
from tests.ui.pty_harness import PtyApp, pids_with_token, process_state

# How long a test waits for Escape to act before it fails as hung; the latency itself is
# a figure of bench/ui.py, never an assertion here (the machines are shared and noisy).
ESCAPE_WAIT = 8.0
# What the next request carries of a stop (the history keeps its own marker).
STOP_NOTE = "[Request interrupted by user]"


def wait_question(app: PtyApp, command: str) -> None:
    """Wait for the approval question (the launch turned the guard off: no pause needed)."""
    app.wait_for(command, where="screen")
    app.wait_for(APPROVAL_QUESTION, where="screen")


def history_text(request: dict[str, object]) -> str:
    messages = request["messages"]
    assert isinstance(messages, list)
    return "\n".join(str(m.get("content", "")) for m in messages)


def test_streamed_answer_appears_while_it_streams(launch: Launch, start_fake: StartFake) -> None:
    pieces = ("Hel", "lo ", "from ", "the ", "fake ", "model.")
    fake = start_fake(script(text_response(*pieces, delay=0.25)))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "say hello")
    # Part of the answer is on screen before the rest has arrived: it really streams.
    app.wait_until(
        lambda a: "Hello from" in (s := a.screen_text()) and "fake model." not in s,
        "a partial answer",
    )
    # The session is named after its first prompt when the turn starts, not when it ends.
    app.wait_until(
        lambda a: "fake model." not in a.screen_text() and bool(status_line(a, "“say hello”")),
        "the session title in the status bar while the answer streams",
    )
    app.wait_for("Hello from the fake model.")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == "say hello"


def test_command_runs_after_y(launch: Launch, start_fake: StartFake) -> None:
    command = "echo ZC_MARK_$((40+2))"
    fake = start_fake(script(command_response(command), text_response("All done.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "run the marker command")
    wait_question(app, command)
    app.send("y")
    app.wait_for("ZC_MARK_42")  # the shell expanded it: the command really ran
    app.wait_for("All done.")
    first, second = wait_requests(fake, 2)
    assert not any("ZC_MARK_42" in m for m in messages_of(first, "tool"))
    (result,) = messages_of(second, "tool")
    assert "ZC_MARK_42" in result
    assert "Exit code: 0" in result


@pytest.mark.parametrize("key", ["n", "escape"])
def test_denied_command_does_not_run(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs, key: str
) -> None:
    command = "echo ZC_DENIED > denied.txt"
    fake = start_fake(script(command_response(command), text_response("Understood.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "try the command")
    wait_question(app, command)
    if key == "escape":
        app.press("escape")
    else:
        app.send(key)
    app.wait_for("Understood.")
    _, second = wait_requests(fake, 2)
    (result,) = messages_of(second, "tool")
    assert "user denied command" in result
    assert not (pty_dirs.workspace / "denied.txt").exists()


def test_escape_stops_a_slow_stream(launch: Launch, start_fake: StartFake) -> None:
    slow = text_response(*(f"w{i:02d} " for i in range(40)), delay=0.5)
    fake = start_fake(script(slow, text_response("Ready again.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "talk slowly")
    app.wait_for("w01", where="screen")
    app.press("escape")
    app.wait_for(STOPPED, timeout=ESCAPE_WAIT)
    assert "w10" not in app.all_text()
    submit(app, "are you there")
    app.wait_for("Ready again.")
    _, second = wait_requests(fake, 2)
    history = history_text(second)
    assert STOP_NOTE in history
    assert "w01" not in history  # partial text of a cancelled stream never enters history
    # The fake notices the closed stream at its next chunk, maybe after the second reply.
    deadline = time.monotonic() + 5
    while len(outcomes := fake.outcomes()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(outcomes) == ["client_disconnected", "complete"]


def test_escape_kills_a_running_command(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    fake = start_fake(script(command_response(SLEEP_COMMAND), text_response("Next turn fine.")))
    app = launch.zcoder(fake.url, "--yes")
    wait_ready(app)
    submit(app, "sleep for a while")
    pid = sleep_pid(pty_dirs.workspace)
    app.press("escape")
    app.wait_until(lambda a: process_state(pid) in (None, "Z"), "sleep killed", ESCAPE_WAIT)
    app.wait_for(STOPPED, timeout=ESCAPE_WAIT)
    submit(app, "carry on")
    app.wait_for("Next turn fine.")
    assert process_state(pid) is None, "the killed command was never reaped"
    assert set(pids_with_token(app.token)) <= {app.app_pid, app.child.pid}
    _, second = wait_requests(fake, 2)
    assert STOP_NOTE in history_text(second)


def test_typing_during_a_turn_is_queued(launch: Launch, start_fake: StartFake) -> None:
    slow = text_response(*(f"s{i} " for i in range(12)), "first done.", delay=0.2)
    fake = start_fake(script(slow, text_response("Second answer.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "first question")
    app.wait_for("s0", where="screen")
    submit(app, "queued question QX")
    app.wait_for(QUEUED, where="screen")
    assert len(fake.chat_requests()) == 1  # not sent while the turn runs
    app.wait_for("Second answer.")
    first, second = wait_requests(fake, 2)
    assert not any("QX" in m for m in messages_of(first, "user"))
    assert messages_of(second, "user")[-1] == "queued question QX"
    assert "first done." in messages_of(second, "assistant")[-1]


def _type_into_question(app: PtyApp, burst: bool) -> None:
    """Type ``y`` before the question shows: once, or as a burst that runs into it."""
    time.sleep(0.2)
    app.send("y")
    while burst and not APPROVAL_QUESTION.search(app.screen_text()):
        time.sleep(0.1)
        app.send("y")
    for _ in range(3 if burst else 0):
        time.sleep(0.1)
        app.send("y")


@pytest.mark.parametrize("burst", [False, True], ids=["before", "burst"])
def test_approval_keys_typed_early_do_not_answer(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs, burst: bool
) -> None:
    command = "echo EARLY > early.txt"
    asks = command_response(command, delay=0.5, say="Let me check.")
    fake = start_fake(script(asks, text_response("Denied, fine.")))
    app = launch.zcoder(fake.url, guard=True)  # the one pty test of the guard's default
    wait_ready(app)
    submit(app, "do the early thing")
    _type_into_question(app, burst)
    wait_question(app, command)
    time.sleep(0.3)
    app.wait_for(APPROVAL_QUESTION, timeout=2, where="screen")  # still open
    assert not (pty_dirs.workspace / "early.txt").exists()
    assert len(fake.chat_requests()) == 1
    app.send("n")
    app.wait_for("Denied, fine.")
    _, second = wait_requests(fake, 2)
    assert "user denied command" in messages_of(second, "tool")[0]
    assert not (pty_dirs.workspace / "early.txt").exists()


def test_alt_enter_inserts_a_newline(launch: Launch, start_fake: StartFake) -> None:
    fake = start_fake(script(text_response("Two lines received.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    app.send("line one")
    app.press("alt-enter")
    app.send("line two")
    app.press("enter")
    app.wait_for("Two lines received.")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == "line one\nline two"


def test_control_characters_are_shown_not_obeyed(launch: Launch, start_fake: StartFake) -> None:
    # A reply that would clear the screen and home the cursor if written raw.
    fake = start_fake(script(text_response("before\x1b[2J\x1b[H", "after\x07 end")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "show me controls")
    app.wait_for("before^[[2J^[[Hafter^G end", where="screen")
    assert "› show me controls" in app.screen_text()  # nothing was cleared
    assert b"\x1b[2J\x1b[H" not in app.raw_bytes()
