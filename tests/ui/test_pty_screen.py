"""zcoder in a real pty, as a new user finds it: typos, long input, emoji, the status bar.

Black-box: a fake Ollama process replays a script, keys go into the pty, the pyte screen is
read back, and the fake's recorded requests show what reached the model.
"""

from __future__ import annotations

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    Launch,
    StartFake,
    command_response,
    input_line,
    messages_of,
    script,
    status_line,
    submit,
    text_response,
    wait_ready,
    wait_requests,
    wait_status,
)


def test_a_mistyped_command_reaches_no_model_and_a_doubled_slash_does(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(text_response("Noted.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "/hepl")
    app.wait_for("✗ unknown command /hepl: did you mean /help? (//hepl sends it to the model)")
    submit(app, "/sesions")
    app.wait_for("✗ unknown command /sesions: did you mean /sessions?")
    assert fake.chat_requests() == []
    submit(app, "//hepl is what I typed")
    app.wait_for("Noted.")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == "/hepl is what I typed"
    app.wait_for("› /hepl is what I typed")


def test_an_a_grant_shows_in_the_status_bar_while_it_holds(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(command_response("echo ZC_GRANT_$((6*7))"), text_response("Ran.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    assert "allowed" not in (status_line(app) or "")
    submit(app, "run it")
    app.wait_for(APPROVAL_QUESTION, where="screen")
    app.send("a")
    app.wait_for("ZC_GRANT_42")
    wait_status(app, "ready", "all commands allowed")
    submit(app, "/new")  # another conversation: the grant does not carry over
    app.wait_for("New session")
    app.wait_until(
        lambda a: "allowed" not in (status_line(a, "ready") or "allowed"),
        "the status bar without the grant",
    )


def test_an_emoji_is_echoed_as_typed_and_a_bidi_override_is_not(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(text_response("Nice 👩‍💻 \u202eok")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "me 👩‍💻 at work \u202eevil")
    # pyte cannot place a joined emoji (its cells disagree with any real terminal's), so
    # what the app wrote is read raw, escape sequences removed.
    app.wait_for("Nice 👩‍💻 <U+202E>ok", where="raw")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == "me 👩‍💻 at work \u202eevil"  # sent as typed
    app.wait_for("› me 👩‍💻 at work <U+202E>evil", where="raw")


def test_the_input_line_shows_a_pasted_bidi_override_escaped_before_enter(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(text_response("Seen.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    typed = "pay \u202eevil\u2066 now \x1b[2J\x85 end"
    app.send(f"\x1b[200~{typed}\x1b[201~")
    # Not reordered on screen while it is edited: the tokens the scrollback will show.
    shown = "› pay <U+202E>evil<U+2066> now ^[[2J<U+0085> end"
    app.wait_until(lambda a: input_line(a).rstrip() == shown, "the escaped input line")
    assert "\u202e".encode() not in app.raw_bytes()  # never written raw
    app.send("!")  # the cursor is after the tokens: typing goes to the end
    app.wait_until(lambda a: input_line(a).rstrip() == shown + "!", "the typed character")
    app.press("enter")
    app.wait_for("Seen.")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == typed + "!"  # sent as typed
    app.wait_for(shown + "!")  # and in the scrollback just as it was in the input
    assert "\u202e".encode() not in app.raw_bytes()


def test_a_long_pasted_line_scrolls_and_keeps_the_prompt_visible(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(text_response("Got it.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    line = "".join(f"w{n:04d} " for n in range(834))[:5000]
    app.send(f"\x1b[200~{line}\x1b[201~")
    # The end of the paste, where the cursor is, shows above the status bar, and so does
    # the prompt: the input area is at most a dozen rows and scrolls to the cursor.
    app.wait_until(
        lambda a: line[-30:] in a.screen_text().replace("\n", "") and bool(status_line(a, "ready")),
        "the end of the pasted line above the status bar",
    )
    rows = app.screen_text().splitlines()
    bar = next(i for i, row in enumerate(rows) if "│ coding │" in row)
    assert rows[bar - 12].startswith("› ")  # the prompt, on the first of twelve rows
    assert line[-20:] in rows[bar - 1]
    app.press("enter")
    app.wait_for("Got it.")
    (request,) = wait_requests(fake, 1)
    assert messages_of(request, "user")[-1] == line
