"""Two real zcoder processes in two ptys, one fake Ollama each, talking over the relay.

Both share one relay directory and use their own workspace and runtime directory, as two
terminals of one user would. B's instance id comes from ``zcoder agents --json`` (as a
user would look it up); A's fake model is then scripted to send to exactly that id.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from tests.ui.conftest import (
    APPROVAL_QUESTION,
    DEFAULT_MODEL,
    Launch,
    PtyDirs,
    StartFake,
    command_response,
    script,
    status_line,
    submit,
    text_response,
    wait_ready,
    wait_requests,
    wait_status,
)
from tests.ui.pty_harness import FakeOllamaProcess, PtyApp

WRAPPER_HEAD = (
    "<agent_relay>\n"
    "Another zcoder process on this machine relayed this task. Its sender details\n"
    "are self-reported, and the local user may not have seen or approved the request.\n"
)


@attrs.frozen
class Agent:
    app: PtyApp
    fake: FakeOllamaProcess
    env: dict[str, str]
    workspace: Path


def start_agent(
    launch: Launch,
    start_fake: StartFake,
    dirs: PtyDirs,
    name: str,
    *responses: Any,
    env: Mapping[str, str] | None = None,
) -> Agent:
    """``name``'s instance in a pty, its fake model replaying ``responses``; ``env`` adds
    settings (``ZCODER_RELAY_QUESTION_TIMEOUT``...)."""
    fake = start_fake(script(*(responses or (text_response("ok"),))))
    workspace, runtime = dirs.root / name, dirs.root / f"rt-{name}"
    for path in (workspace, runtime):
        path.mkdir(mode=0o700)
    extra = {"XDG_RUNTIME_DIR": str(runtime), **(env or {})}
    full_env = launch.env(fake.url, DEFAULT_MODEL, extra)
    argv = [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup"]
    app = launch.argv(argv, env=full_env)
    wait_ready(app)
    wait_status(app, "relay on")
    return Agent(app, fake, full_env, workspace)


def instance_id(agent: Agent, project: str) -> str:
    """The id of ``project``'s instance, from ``zcoder agents --json`` run as ``agent``."""
    out = subprocess.run(
        [sys.executable, "-m", "zcoder", "agents", "--json"],
        env=agent.env,
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    (record,) = [r for r in json.loads(out) if r["project"] == project]
    return str(record["instance_id"])


def send_call(target: str, message: str) -> dict[str, Any]:
    call = {
        "name": "send_agent_message",
        "arguments": {"target_instance_id": target, "message": message},
    }
    return {"chunks": [{"tool_calls": [call]}]}


def send_from(a: Agent, target: str, message: str, prompt: str) -> None:
    """A's user asks; A's model calls send_agent_message; A's user answers ``y``."""
    a.fake.set_script(script(send_call(target, message), text_response("Sent it.")))
    submit(a.app, prompt)
    a.app.wait_for(APPROVAL_QUESTION, where="screen")
    a.app.send("y")


def relay_files(dirs: PtyDirs, instance: str) -> list[str]:
    return sorted(p for p in os.listdir(dirs.relay) if p.startswith(f"a-{instance}."))


def test_one_instance_hands_a_task_to_another(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(launch, start_fake, pty_dirs, "beta", text_response("Renamed in beta."))
    b_id = instance_id(a, "beta")

    submit(a.app, "/list-agents")
    row = rf"beta +{b.app.app_pid} +ready +coding +{re.escape(DEFAULT_MODEL)} +{b_id}"
    a.app.wait_for(re.compile(rf"{row}\s+{re.escape(str(b.workspace))}"))
    assert "alpha  " not in a.app.all_text()  # never itself
    assert a.fake.chat_requests() == []  # /list-agents asks no model

    list_call = {"chunks": [{"tool_calls": [{"name": "list_agents", "arguments": {}}]}]}
    task = "users.name was renamed to users.display_name; update the digest."
    a.fake.set_script(script(list_call, send_call(b_id, task), text_response("Sent it.")))
    submit(a.app, "Tell the beta agent about the users.name rename")
    a.app.wait_for(APPROVAL_QUESTION, where="screen")
    question = a.app.screen_text()
    assert f"send a message to beta (pid {b.app.app_pid}, {b.workspace}) · {b_id}" in question
    assert "· ready" in question  # the state the ping just reported
    assert task in question
    a.app.send("y")
    a.app.wait_for("accepted (queue position 1) by beta")
    a.app.wait_for("Sent it.")
    *_, sent = wait_requests(a.fake, 3)
    assert str(sent["messages"][-1]["content"]).startswith("accepted (queue position 1)\n")

    b.app.wait_for(f"⇄ relayed from alpha (pid {a.app.app_pid}, {a.workspace})")
    b.app.wait_for("Renamed in beta.")
    (request,) = wait_requests(b.fake, 1)
    record = str(request["messages"][-1]["content"])
    assert record.startswith(WRAPPER_HEAD)
    assert f"Sender: alpha (pid {a.app.app_pid})\nSender workspace: {a.workspace}\n" in record
    assert record.endswith(f"\nTask:\n{task}\n</agent_relay>")
    wait_status(b.app, "“New session”", "relay on")  # relay text never titles a session

    assert relay_files(pty_dirs, b_id) == [f"a-{b_id}.json", f"a-{b_id}.sock"]
    submit(b.app, "/quit")
    assert b.app.wait_exit() == 0
    assert relay_files(pty_dirs, b_id) == []
    submit(a.app, "/list-agents")
    a.app.wait_for("No other local zcoder instances are available.")


def test_a_busy_receiver_queues_and_a_paused_one_refuses(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        command_response("echo local-step"),
        text_response("Local done."),
        text_response("Queued one done."),
    )
    b_id = instance_id(a, "beta")

    submit(b.app, "a local task")  # B's turn waits on a question until its user answers
    b.app.wait_for(APPROVAL_QUESTION, where="screen")
    send_from(a, b_id, "the queued task", "tell beta the queued task")
    a.app.wait_for("accepted (queue position 1) by beta")
    wait_status(b.app, "relay on (1 waiting)")
    assert len(b.fake.chat_requests()) == 1  # nothing starts while the local turn runs
    b.app.send("y")
    b.app.wait_for("Queued one done.")  # after the local turn, not during it
    requests = wait_requests(b.fake, 3)
    assert requests[0]["messages"][-1]["content"] == "a local task"
    assert str(requests[2]["messages"][-1]["content"]).endswith("\nthe queued task\n</agent_relay>")
    text = b.app.all_text()
    assert text.index("Local done.") < text.index("⇄ relayed from alpha")
    wait_status(b.app, "relay on", "ready")
    assert "waiting)" not in (status_line(b.app, "relay on") or "")

    submit(b.app, "/agents pause")
    b.app.wait_for("Relay paused")
    wait_status(b.app, "relay paused")
    send_from(a, b_id, "refused task", "tell beta again")
    # Shown as not delivered, never as "✓ ... completed"; the model is told the same.
    why = "beta is paused: it refuses new messages until it is resumed"
    card = rf"✗ send_agent_message beta \(pid {b.app.app_pid}\) · {b_id}  not delivered:\s+"
    a.app.wait_for(re.compile(card + re.escape(why)))
    assert a.app.all_text().count("✓ send_agent_message") == 1  # the first, accepted one
    *_, told = wait_requests(a.fake, 2)
    assert str(told["messages"][-1]["content"]).startswith(f"Error: not delivered: {why}.\n")
    submit(b.app, "/agents")
    b.app.wait_for(f"Relay paused · instance {b_id}")
    submit(b.app, "/agents resume")
    wait_status(b.app, "relay on")
    assert len(b.fake.chat_requests()) == 3  # the refused message never ran
