"""``/send @label`` between two real zcoder processes in ptys: A's user sends by B's agent
name (Tab completes it), A's model is never asked, and B runs the task."""

from __future__ import annotations

import sys
from typing import Any

from tests.ui.conftest import (
    DEFAULT_MODEL,
    Launch,
    PtyDirs,
    StartFake,
    script,
    submit,
    text_response,
    wait_ready,
    wait_requests,
    wait_status,
)
from tests.ui.test_pty_relay import WRAPPER_HEAD, Agent


def start_named(
    launch: Launch,
    start_fake: StartFake,
    dirs: PtyDirs,
    name: str,
    *responses: Any,
    flags: Any = (),
) -> Agent:
    fake = start_fake(script(*(responses or (text_response("ok"),))))
    workspace, runtime = dirs.root / name, dirs.root / f"rt-{name}"
    for path in (workspace, runtime):
        path.mkdir(mode=0o700)
    env = launch.env(fake.url, DEFAULT_MODEL, {"XDG_RUNTIME_DIR": str(runtime)})
    argv = [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup", *flags]
    app = launch.argv(argv, env=env)
    wait_ready(app)
    wait_status(app, "relay on")
    return Agent(app, fake, env, workspace)


def test_send_by_agent_name_reaches_the_other_instance_which_runs_it(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_named(launch, start_fake, pty_dirs, "alpha")
    b = start_named(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        text_response("Reviewed in beta."),
        flags=("--agent-name", "reviewer"),
    )
    b.app.wait_for("agent name reviewer")  # the welcome line says how others reach it

    submit(a.app, "/list-agents")  # a discovery: Tab completes from it
    a.app.wait_for("reviewer")
    a.app.send("/send @rev\t")
    a.app.wait_for("/send @reviewer", where="screen")
    a.app.send(" review the parser\r")
    a.app.wait_for(f"✓ /send reviewer (pid {b.app.app_pid})")
    a.app.wait_for("delivered · #1 accepted (queue position 1) by reviewer")
    assert a.fake.chat_requests() == []  # no model turn, no question on A

    b.app.wait_for(f"⇄ relayed from alpha (pid {a.app.app_pid}, {a.workspace})")
    b.app.wait_for("Reviewed in beta.")
    (request,) = wait_requests(b.fake, 1)
    record = str(request["messages"][-1]["content"])
    assert record.startswith(WRAPPER_HEAD)
    assert record.endswith("\nTask:\nreview the parser\n</agent_relay>")

    submit(a.app, "/send @nobody hello")
    a.app.wait_for("no live instance has the id or name '@nobody'. Live instances: @reviewer")
    for agent in (a, b):
        submit(agent.app, "/quit")
        assert agent.app.wait_exit() == 0
