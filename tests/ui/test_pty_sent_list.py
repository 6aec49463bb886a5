"""The words a new user reads, in real ptys (issue "As a new user finds it", items 6a and
7): a send card says ``delivered``, a receipt's answer is rendered as Markdown,
``/agents sent`` after ``--resume`` lists the earlier sends (and ``/new`` starts an empty
list), and ``/sessions`` names a model file by its name."""

from __future__ import annotations

import re
import sys

from tests.ui.conftest import (
    RESUME_HINT,
    Launch,
    PtyDirs,
    StartFake,
    script,
    submit,
    text_response,
    wait_ready,
    wait_status,
)
from tests.ui.test_pty_relay import instance_id, send_from, start_agent


def test_the_sent_list_survives_a_resume_and_the_card_says_delivered(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    answer = "*I'm about to fix the test*\n\n**Done**: the test passes."
    b = start_agent(launch, start_fake, pty_dirs, "beta", text_response(answer))
    b_id = instance_id(a, "beta")
    send_from(a, b_id, "fix the flaky test", "tell beta")
    who = f"beta (pid {b.app.app_pid})"
    a.app.wait_for(re.compile(rf"✓ send_agent_message {re.escape(who)} · {b_id}\s+delivered"))
    a.app.wait_for(f'⇄ {who} completed your message #1 "fix the flaky test"')
    a.app.wait_for("the test passes.")
    shown = a.app.all_text()
    assert "I'm about to fix the test" in shown
    assert "*I'm about" not in shown and "**Done**" not in shown  # rendered, not raw
    a.app.wait_for("Sent it.")
    a.app.press("ctrl-d")
    assert a.app.wait_exit() == 0
    sid = a.app.wait_for(RESUME_HINT, timeout=2).split()[-1]

    argv = [sys.executable, "-m", "zcoder", "-w", str(a.workspace), "--no-warmup"]
    again = launch.argv([*argv, "--resume", sid], env=a.env)
    wait_ready(again)
    wait_status(again, "relay on")
    submit(again, "/agents sent")
    line = rf"1\. \S+ → {re.escape(who)} · completed · .* fix the flaky test"
    again.wait_for(re.compile(line))
    assert "No messages sent" not in again.all_text()
    submit(again, "/new")
    submit(again, "/agents sent")
    again.wait_for("No messages sent in this session yet.")


def test_sessions_name_a_model_file_by_its_name(launch: Launch, start_fake: StartFake) -> None:
    model = "/path/to/smollm2.gguf"
    fake = start_fake(script(text_response("Noted."), models=[model]))
    app = launch.zcoder(fake.url, model=model)
    wait_status(app, " ready ", "smollm2.gguf")
    submit(app, "remember this")
    app.wait_for("Noted.")
    submit(app, "/sessions")
    app.wait_for(re.compile(r"remember this  \(smollm2\.gguf; 2 messages, "))
    assert "/path/to/smollm2.gguf;" not in app.all_text()
