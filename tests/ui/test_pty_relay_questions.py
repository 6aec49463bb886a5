"""A receiver nobody watches (issue 25, items 4 and 5), two real zcoder processes in two
ptys: the relayed task's command question expires after ``ZCODER_RELAY_QUESTION_TIMEOUT``,
the sender sees its task wait and then its outcome, and the receiver's queue goes on."""

from __future__ import annotations

import re

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    messages_of,
    submit,
    text_response,
)
from tests.ui.test_pty_relay import start_agent


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
