"""zcoder in a real pty: slash commands, sessions, exits, Ollama down."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from tests.ui.conftest import (
    DEFAULT_MODEL,
    RESUME_HINT,
    SLEEP_COMMAND,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    input_line,
    messages_of,
    script,
    sleep_pid,
    submit,
    text_response,
    wait_ready,
    wait_requests,
    wait_status,
)
from tests.ui.pty_harness import PtyApp, closed_port_url, pids_with_token, process_state

OTHER_MODEL = "llama3.2:1b"


def test_model_lists_and_switches(launch: Launch, start_fake: StartFake) -> None:
    fake = start_fake(script(text_response("Hi from llama."), models=[DEFAULT_MODEL, OTHER_MODEL]))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "/model")
    app.wait_for(OTHER_MODEL)
    # Polled: the status bar is redrawn just after a transcript line is printed.
    wait_status(app, DEFAULT_MODEL)  # listed, not switched to
    submit(app, "/model nosuch:7b")
    app.wait_for(re.compile(r"✗.*nosuch:7b"))  # a clear error, and nothing changes
    wait_status(app, DEFAULT_MODEL)
    # Tab completes the command, then the model name from the server's list.
    app.send("/mo")
    app.press("tab")
    app.wait_until(lambda a: input_line(a) == "› /model", "/mo completed")
    app.send(" ll")
    app.press("tab")
    app.wait_until(lambda a: input_line(a) == f"› /model {OTHER_MODEL}", "model completed")
    app.press("enter")
    wait_status(app, OTHER_MODEL)
    submit(app, "/etc/hosts: what is it")  # not a command: it goes to the model
    app.wait_for("Hi from llama.")
    (request,) = wait_requests(fake, 1)
    assert request["model"] == OTHER_MODEL
    assert messages_of(request, "user")[-1] == "/etc/hosts: what is it"


def test_warmup_loads_the_model_before_the_first_turn(
    launch: Launch, start_fake: StartFake
) -> None:
    fake = start_fake(script(text_response("Warm answer.")))
    app = launch.zcoder(fake.url, warmup=True)
    wait_ready(app)
    app.wait_until(lambda a: bool(fake.requests()), "a warm-up request")
    (warm,) = fake.requests()
    assert warm["model"] == DEFAULT_MODEL
    assert [m["role"] for m in warm["messages"]] == ["system"]
    assert warm["options"]["num_predict"] == 1
    wait_status(app, " ready ")
    submit(app, "first real prompt")
    app.wait_for("Warm answer.")
    (request,) = wait_requests(fake, 1)
    # The warm-up's result is never stored: the history is the system prompt and the prompt.
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    # It sent the first turn's prefix, so the server's prompt cache holds it.
    assert warm["messages"] == request["messages"][:1] and warm["tools"] == request["tools"]


def _session_number(app: PtyApp, title: str) -> str:
    """Wait for ``/sessions`` to list ``title`` as ``N. title``; return N."""
    listed = app.wait_for(re.compile(rf"(\d+)\. {re.escape(title)}"))
    return listed.split(".")[0]


def test_new_and_sessions_switch(launch: Launch, start_fake: StartFake) -> None:
    answers = ("Answer one.", "Answer two.", "Answer three.")
    fake = start_fake(script(*(text_response(a) for a in answers)))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "alpha session prompt")
    app.wait_for("Answer one.")
    wait_status(app, "alpha session prompt")
    submit(app, "/new")
    wait_status(app, "New session")
    submit(app, "beta prompt")
    app.wait_for("Answer two.")
    wait_status(app, "beta prompt")
    submit(app, "/sessions")
    number = _session_number(app, "alpha session prompt")
    submit(app, f"/sessions {number}")
    wait_status(app, "alpha session prompt")
    submit(app, "follow up")
    app.wait_for("Answer three.")
    *_, third = wait_requests(fake, 3)
    assert messages_of(third, "user") == ["alpha session prompt", "follow up"]
    assert "Answer one." in messages_of(third, "assistant")


def test_sessions_lists_the_apps_sessions_first_and_only_the_newest_one_shot_runs(
    launch: Launch, start_fake: StartFake
) -> None:
    runs = [f"scripted run {n}" for n in range(1, 6)]
    fake = start_fake(script(*(text_response(f"Ran {n}.") for n in range(1, 7))))
    env = launch.env(fake.url, DEFAULT_MODEL, {})
    for prompt in runs:  # a script calling zcoder -p in a loop
        argv = [sys.executable, "-m", "zcoder", "-w", str(launch.dirs.workspace), "-p", prompt]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "an app prompt")
    app.wait_for("Ran 6.")
    wait_status(app, "an app prompt")
    submit(app, "/sessions")
    app.wait_for("the newest only; /sessions ID opens any.")
    listed = app.all_text()
    assert re.search(r"\*\s+1\. an app prompt", listed), listed
    for n, prompt in zip((2, 3, 4), reversed(runs), strict=False):
        assert re.search(rf"{n}\. {prompt} .*a one-shot run", listed), listed
    assert "scripted run 2" not in listed and "scripted run 1" not in listed


def _assert_nothing_left(app: PtyApp, dirs: PtyDirs) -> None:
    """No process, private runtime dir, relay manifest or socket outlives the app."""
    assert pids_with_token(app.token) == []
    leftovers = [p for p in os.listdir(dirs.runtime) if p.startswith("zcoder-")]
    assert leftovers == [], leftovers
    if dirs.relay.exists():
        relay = [p for p in dirs.relay.rglob("*") if p.suffix == ".json" or p.is_socket()]
        assert relay == [], relay


def _assert_clean_exit(app: PtyApp, dirs: PtyDirs) -> str:
    """Terminal restored, resume hint printed, nothing left behind; returns the hint."""
    app.assert_terminal_restored()
    hint = app.wait_for(RESUME_HINT, timeout=2)
    _assert_nothing_left(app, dirs)
    return hint


def test_ctrl_d_exits_cleanly_with_resume_hint(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    fake = start_fake(script(text_response("Noted."), text_response("Resumed.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "remember this")
    app.wait_for("Noted.")
    app.press("ctrl-d")
    assert app.wait_exit() == 0
    hint = _assert_clean_exit(app, pty_dirs)
    # The hint works: the resumed session continues the conversation.
    again = launch.zcoder(fake.url, "--resume", hint.split()[-1])
    wait_status(again, "remember this")
    submit(again, "and now")
    again.wait_for("Resumed.")
    _, request = wait_requests(fake, 2)
    assert messages_of(request, "user") == ["remember this", "and now"]
    assert messages_of(request, "assistant") == ["Noted."]


def test_m_switches_a_resumed_session_to_that_model(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    """``-m NAME --resume ID`` runs the resumed session on NAME, as one-shot mode does."""
    replies = script(text_response("Noted."), text_response("On llama."))
    fake = start_fake({**replies, "models": [DEFAULT_MODEL, OTHER_MODEL]})
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "remember this")
    app.wait_for("Noted.")
    app.press("ctrl-d")
    assert app.wait_exit() == 0
    sid = _assert_clean_exit(app, pty_dirs).split()[-1]
    again = launch.zcoder(fake.url, "-m", OTHER_MODEL, "--resume", sid)
    wait_status(again, OTHER_MODEL, "remember this")
    submit(again, "and now")
    again.wait_for("On llama.")
    _, request = wait_requests(fake, 2)
    assert request["model"] == OTHER_MODEL
    assert messages_of(request, "user") == ["remember this", "and now"]


def test_sigterm_exits_cleanly(launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs) -> None:
    fake = start_fake(script(text_response("Noted.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "remember this")
    app.wait_for("Noted.")
    app.signal(signal.SIGTERM)
    status = app.wait_exit()
    print(f"\nexit status after SIGTERM: {status}")
    # 143 is also what a default SIGTERM death reports, but such a death restores no
    # terminal and prints no hint, which the next check catches.
    assert status in (0, 128 + signal.SIGTERM)
    _assert_clean_exit(app, pty_dirs)


def test_ctrl_c_clears_then_exits_even_mid_command(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    fake = start_fake(script(command_response(SLEEP_COMMAND)))
    app = launch.zcoder(fake.url, "--yes")
    wait_ready(app)
    submit(app, "sleep for a while")
    pid = sleep_pid(pty_dirs.workspace)
    app.send("draft words")
    app.wait_for("draft words", where="screen")
    app.press("ctrl-c")  # clears the input, nothing else
    app.wait_gone("draft words")
    assert process_state(pid) not in (None, "Z")
    app.press("ctrl-c")  # on an empty input: exit, killing the running command
    status = app.wait_exit()
    print(f"\nexit status after Ctrl-C: {status}")
    assert status in (0, 130)
    assert process_state(pid) in (None, "Z"), "the running command outlived zcoder"
    _assert_clean_exit(app, pty_dirs)


def test_hang_up_ends_the_app_and_leaves_nothing(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    fake = start_fake(script(text_response("Noted.")))
    app = launch.zcoder(fake.url)
    wait_ready(app)
    submit(app, "remember this")
    app.wait_for("Noted.")
    pid = app.app_pid
    app.hang_up()
    deadline = time.monotonic() + 10
    while process_state(pid) not in (None, "Z"):
        assert time.monotonic() < deadline, "zcoder outlived its terminal"
        time.sleep(0.05)
    _assert_nothing_left(app, pty_dirs)


def test_ollama_down_is_one_line_and_app_stays_up(launch: Launch) -> None:
    app = launch.zcoder(closed_port_url())
    wait_ready(app)
    submit(app, "anyone home")
    # One logical line (the terminal may wrap it): look in the raw output, not the rows.
    line = app.wait_for(re.compile(r"✗[^\n]*(ollama serve|--host)[^\n]*"), where="raw")
    assert "Traceback" not in app.all_text()
    print(f"\nOllama-down message: {line.strip()}")
    # The prompt never reached the model, so it is back in the input: cleared, not sent again.
    app.wait_for("Your prompt is back in the input")
    app.send("\x15")
    submit(app, "/help")
    app.wait_for("/model [NAME]")
    app.wait_for("/sessions [N|ID]")
    assert "anyone home/help" not in app.all_text()
    submit(app, "/quit")
    assert app.wait_exit() == 0
    app.assert_terminal_restored()


def test_unwritable_debug_log_is_one_line_and_exit_2(launch: Launch, pty_dirs: PtyDirs) -> None:
    app = launch.zcoder(closed_port_url(), "--debug-log", str(pty_dirs.root / "no" / "x.log"))
    assert app.wait_exit() == 2
    assert "zcoder: --debug-log: cannot write" in app.raw_text()
    assert "Traceback" not in app.raw_text()
