"""Relayed work is never lost and never hidden (issue 7, items 16 and 17), in real ptys.

B's fake Ollama lacks B's model at first, so B's relayed turn never reaches the model: the
message stays queued and the status bar says it waits for the model. Leaving with it asks
once (``/quit``), and any exit names what it dropped.
"""

from __future__ import annotations

import signal
import sys

import pytest

from tests.ui.conftest import (
    DEFAULT_MODEL,
    Launch,
    PtyDirs,
    StartFake,
    script,
    submit,
    text_response,
    wait_ready,
    wait_status,
)
from tests.ui.test_pty_relay import Agent, instance_id, send_from, start_agent

WAITS = "relay on (1 waiting for the model)"
NOT_REACHED = "did not reach the model: it stays first in the queue"


def start_without_model(launch: Launch, start_fake: StartFake, dirs: PtyDirs) -> Agent:
    fake = start_fake(script(text_response("Renamed in beta."), models=["other:latest"]))
    workspace, runtime = dirs.root / "beta", dirs.root / "rt-beta"
    for path in (workspace, runtime):
        path.mkdir(mode=0o700)
    env = launch.env(fake.url, DEFAULT_MODEL, {"XDG_RUNTIME_DIR": str(runtime)})
    argv = [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup"]
    app = launch.argv(argv, env=env)
    wait_ready(app)
    wait_status(app, "relay on")
    return Agent(app, fake, env, workspace)


def hand_over(launch: Launch, start_fake: StartFake, dirs: PtyDirs) -> tuple[Agent, Agent]:
    """A sends B a task B cannot run yet; returns once B shows it waits for the model."""
    a = start_agent(launch, start_fake, dirs, "alpha")
    b = start_without_model(launch, start_fake, dirs)
    send_from(a, instance_id(a, "beta"), "rename users.name", "tell beta")
    a.app.wait_for("accepted (queue position 1) by beta")
    b.app.wait_for(f"model '{DEFAULT_MODEL}' not found")
    b.app.wait_for(NOT_REACHED)
    wait_status(b.app, WAITS)
    return a, b


def test_a_message_waits_for_the_model_and_runs_when_it_is_there(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    _, b = hand_over(launch, start_fake, pty_dirs)
    submit(b.app, "/agents")
    b.app.wait_for("1 waiting")
    b.fake.set_script(script(text_response("Renamed in beta.")))  # `ollama pull` done
    b.app.wait_for("Renamed in beta.", timeout=15)  # the next check finds the model
    wait_status(b.app, "relay on", "ready")
    relayed = [r for r in b.fake.chat_requests() if "rename users.name" in str(r["messages"])]
    assert len(relayed) == 2  # the refused attempt (404) and the one that ran
    submit(b.app, "/quit")  # nothing waits: leaves at once
    assert b.app.wait_exit() == 0
    assert "Dropped" not in b.app.raw_text()


def test_the_first_quit_names_what_it_would_drop_and_the_second_leaves(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a, b = hand_over(launch, start_fake, pty_dirs)
    sender = f"alpha (pid {a.app.app_pid})"
    submit(b.app, "/quit")
    b.app.wait_for("leaving drops it")
    flat = " ".join(b.app.all_text().split())
    assert f"1 accepted relayed message has not run yet, from {sender}: leaving drops it." in flat
    assert b.app.child.isalive()
    b.app.press("ctrl-d")
    assert b.app.wait_exit() == 0
    b.app.wait_for("Dropped 1 accepted relayed message that had not run")
    b.app.wait_for(f"from {sender}: rename users.name")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_leaves_at_once_and_names_what_it_dropped(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs, signum: signal.Signals
) -> None:
    a, b = hand_over(launch, start_fake, pty_dirs)
    b.app.signal(signum)
    assert b.app.wait_exit() == 128 + signum
    b.app.wait_for("Dropped 1 accepted relayed message that had not run")
    b.app.wait_for(f"from alpha (pid {a.app.app_pid}): rename users.name")
