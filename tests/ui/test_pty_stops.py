"""zcoder in a real pty: what the model is sent after a failed prompt and after Escape, and
what a relayed turn after a stopped local prompt sends and reports back.

The trial of the report: a prompt the server refused before any reply, then a long story
stopped with Escape while a ``/compact`` and a prompt were queued behind it, then the next
prompt. The fake Ollama's request log is the model's view: the failed prompt is nowhere,
the stopped one keeps its own message with the note, the next prompt is a message of its
own, and ``/compact`` never reaches the model as text. A relayed task that follows a
stopped local prompt is sent as its relay record alone, and its receipt holds its answer.
"""

from __future__ import annotations

from tests.ui.conftest import (
    QUEUED,
    STOPPED,
    Launch,
    PtyDirs,
    StartFake,
    input_line,
    script,
    submit,
    text_response,
    wait_ready,
    wait_requests,
)
from tests.ui.test_pty_relay import instance_id, send_from, start_agent

ESCAPE_WAIT = 8.0  # a bound for a hung app, never a measurement
STOP_NOTE = "[Request interrupted by user]"


def test_a_failed_prompt_comes_back_and_a_stopped_one_stays_in_its_own_message(
    launch: Launch, start_fake: StartFake
) -> None:
    refused = {"status": 500, "error": "model runner crashed"}
    story = text_response(*(f"once{i} " for i in range(60)), delay=0.3)
    fake = start_fake(script(refused, story, text_response("Paris.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)

    # 1. The server refuses the first prompt before any reply: it comes back to the input.
    submit(app, "lost prompt LP1")
    app.wait_for("back in the input (the model did not get it)", where="screen")
    app.wait_until(lambda a: "lost prompt LP1" in input_line(a), "the prompt back in the input")
    app.send("\x7f" * len("lost prompt LP1"))  # the user does not send it again
    app.wait_until(lambda a: "LP1" not in input_line(a), "the input cleared")

    # 2. A long story, stopped, with /compact and a prompt queued behind it.
    submit(app, "Write a very long story")
    app.wait_for("once1", where="screen")
    submit(app, "/compact")
    submit(app, "What is the capital of France?")
    app.wait_for(QUEUED, where="screen")
    app.press("escape")
    app.wait_for(STOPPED, timeout=ESCAPE_WAIT)
    app.wait_for("Your queued prompts are back in the input.")
    app.wait_for("Not run: /compact; type it again to run it.")
    app.wait_until(lambda a: "capital of France" in input_line(a), "the prompt back in the input")
    assert "/compact" not in input_line(app)

    # 3. The user sends what came back: a message of its own.
    app.press("enter")
    app.wait_for("Paris.")
    _, _, last = wait_requests(fake, 3)
    sent = [(m["role"], m["content"]) for m in last["messages"][1:]]
    assert sent == [
        ("user", f"Write a very long story\n\n{STOP_NOTE}"),
        ("assistant", ""),
        ("user", "What is the capital of France?"),
    ]
    assert len(fake.chat_requests()) == 3  # nothing else went to the model


def test_a_relayed_turn_after_a_stopped_local_prompt_carries_the_relayed_task_only(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    story = text_response(*(f"once{i} " for i in range(60)), delay=0.3)
    b = start_agent(
        launch, start_fake, pty_dirs, "beta", story, text_response("Renamed users.name.")
    )
    # beta's own user stops a local prompt
    submit(b.app, "Write a very long story about BETA-LOCAL")
    b.app.wait_for("once1", where="screen")
    b.app.press("escape")
    b.app.wait_for(STOPPED, timeout=ESCAPE_WAIT)
    # then alpha's task arrives and runs
    send_from(a, instance_id(a, "beta"), "rename users.name", "tell beta")
    who = f"beta (pid {b.app.app_pid})"
    a.app.wait_for(f'⇄ {who} completed your message #1 "rename users.name"')
    a.app.wait_for("Renamed users.name.")
    _, relayed = wait_requests(b.fake, 2)
    sent = [(m["role"], m["content"]) for m in relayed["messages"][1:]]
    assert sent[:2] == [
        ("user", f"Write a very long story about BETA-LOCAL\n\n{STOP_NOTE}"),
        ("assistant", ""),
    ]
    role, record = sent[2]
    assert role == "user" and len(sent) == 3
    assert record.startswith("<agent_relay>") and record.endswith("</agent_relay>")
    assert "\nTask:\nrename users.name\n" in record
    assert "BETA-LOCAL" not in record and STOP_NOTE not in record
    # the receipt holds that turn's answer only
    assert "BETA-LOCAL" not in a.app.all_text() and "interrupted" not in a.app.all_text()
