"""zcoder in a real pty: what the model is sent after a failed prompt and after Escape.

The trial of the report: a prompt the server refused before any reply, then a long story
stopped with Escape while a ``/compact`` and a prompt were queued behind it, then the next
prompt. The fake Ollama's request log is the model's view: the failed prompt is nowhere,
the stopped one keeps its own message with the note, the next prompt is a message of its
own, and ``/compact`` never reaches the model as text.
"""

from __future__ import annotations

from tests.ui.conftest import (
    QUEUED,
    STOPPED,
    Launch,
    StartFake,
    input_line,
    script,
    submit,
    text_response,
    wait_ready,
    wait_requests,
)

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
