"""A receiver nobody watches (issue 25, items 4 and 5), two real zcoder processes in two
ptys: the relayed task's command question expires after ``ZCODER_RELAY_QUESTION_TIMEOUT``,
the sender sees its task wait and then its outcome, and the receiver's queue goes on."""

from __future__ import annotations

import re

import pytest

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    messages_of,
    submit,
    text_response,
    wait_status,
)
from tests.ui.test_pty_relay import start_agent
from zcoder.sandbox.probe import check_sandbox


def test_an_unanswered_question_expires_the_sender_sees_waiting_and_the_queue_goes_on(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        command_response("make test"),
        text_response("I could not run make test: nobody approved it."),
        text_response("Second task done."),
        env={"ZCODER_RELAY_QUESTION_TIMEOUT": "2"},
    )
    who = f"beta (pid {b.app.app_pid})"
    submit(a.app, "/send @beta run the tests")
    a.app.wait_for("accepted (queue position 1) by beta")
    submit(a.app, "/send @beta second task")
    a.app.wait_for(re.compile(r"accepted \(queue position \d\) by beta"))

    # The receiver asks its user, who is not there: the question goes away after 2 s.
    b.app.wait_for(APPROVAL_QUESTION, where="screen")
    b.app.wait_for("The question expired: nobody answered in 2 s, so the command did not run.")
    b.app.wait_gone(APPROVAL_QUESTION)
    # The sender saw its task wait, and why, then go on, then its outcome.
    first = '#1 "run the tests"'
    a.app.wait_for(f"⇄ {who} started your message {first}")
    a.app.wait_for(f"⇄ {who} waits on your message {first}: asks its user to approve: make test")
    a.app.wait_for(f"⇄ {who} goes on with your message {first}: nobody answered in 2 s (counted")
    a.app.wait_for(f"⇄ {who} completed your message {first}")
    a.app.wait_for("I could not run make test: nobody approved it.")
    # The queue went on: the second task ran and reported, with nobody at beta's keyboard.
    a.app.wait_for(f'⇄ {who} completed your message #2 "second task"', timeout=15)
    b.app.wait_for("Second task done.")
    text = a.app.all_text()
    assert text.index("waits on your message #1") < text.index("completed your message #1")
    # The model read that nobody answered and nothing ran.
    requests = b.fake.chat_requests()
    results = [m for r in requests for m in messages_of(r, "tool")]
    assert any(m.startswith("the local user did not answer in 2 seconds") for m in results)
    submit(a.app, "/agents sent")
    a.app.wait_for(re.compile(rf"1\. \S+ → {re.escape(who)} · completed ·"))
    a.app.wait_for(re.compile(rf"2\. \S+ → {re.escape(who)} · completed ·"))


def test_a_sandboxed_receiver_asked_to_run_outside_says_so_and_goes_on_in_the_sandbox(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    """``[relay] commands = "sandbox"``: only the command asked to run OUTSIDE asks; its
    sender hears that, and after the expiry the model runs its command in the sandbox."""
    found = check_sandbox()
    if not found.works:
        pytest.skip(f"the sandbox cannot work here: {found.line()}")
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    outside = {"command": "curl -s http://127.0.0.1:9/", "outside_sandbox": "needs the net"}
    b = start_agent(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        {"chunks": [{"tool_calls": [{"name": "run_command", "arguments": outside}]}]},
        command_response("echo inside > in.txt"),
        text_response("Wrote in.txt in the sandbox."),
        env={"ZCODER_RELAY_QUESTION_TIMEOUT": "2", "ZCODER_RELAY_COMMANDS": "sandbox"},
    )
    wait_status(b.app, "relayed commands sandboxed")
    who = f"beta (pid {b.app.app_pid})"
    submit(a.app, "/send @beta fetch it")
    b.app.wait_for("OUTSIDE the sandbox", where="screen")
    b.app.wait_for("The question expired: nobody answered in 2 s, so the command did not run.")
    waits = f'⇄ {who} waits on your message #1 "fetch it": asks its user to approve running '
    a.app.wait_for(re.compile(re.escape(waits) + r"OUTSIDE the sandbox: curl -s\s+http://"))
    a.app.wait_for(f'⇄ {who} completed your message #1 "fetch it"', timeout=15)
    a.app.wait_for("Changed: in.txt")
    assert (b.workspace / "in.txt").read_text() == "inside\n"
    results = [m for r in b.fake.chat_requests() for m in messages_of(r, "tool")]
    assert any("Without outside_sandbox it runs in the sandbox, unasked." in m for m in results)
