"""Receipts between two real zcoder processes in two ptys (issue 9, items 1-3): the sender
sees its task start and end without looking at the other terminal, ``/agents sent`` lists
it, Escape on the receiver and the receiver leaving are reported, and a version-1-only peer
still takes tasks and is said to send no receipts."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from tests.relay.zsh_peer import ZshPeer
from tests.ui.conftest import Launch, PtyDirs, StartFake, submit, text_response
from tests.ui.test_pty_relay import instance_id, send_from, start_agent
from tests.ui.test_pty_relay_waits import hand_over


def write_call(path: str, content: str) -> dict[str, Any]:
    call = {"name": "write_file", "arguments": {"path": path, "content": content}}
    return {"chunks": [{"tool_calls": [call]}]}


def test_a_task_comes_back_started_then_completed_with_its_answer_and_paths(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(
        launch,
        start_fake,
        pty_dirs,
        "beta",
        write_call("notes.md", "renamed\n"),
        text_response("Renamed users.name in beta.\nThe digest tests pass."),
    )
    send_from(a, instance_id(a, "beta"), "rename users.name", "tell beta")
    who = f"beta (pid {b.app.app_pid})"
    a.app.wait_for(f'⇄ {who} started your message #1 "rename users.name"')
    a.app.wait_for(f'⇄ {who} completed your message #1 "rename users.name"')
    a.app.wait_for("The digest tests pass.")
    assert a.app.all_text().count("Renamed users.name in beta.") == 1  # the answer, once
    a.app.wait_for("Changed: notes.md")
    assert (b.workspace / "notes.md").read_text() == "renamed\n"
    submit(a.app, "/agents sent")
    a.app.wait_for(re.compile(rf"1\. \S+ → {re.escape(who)} · completed · (\d+ s ago|just now)"))
    assert len(a.fake.chat_requests()) == 2  # the send and its answer: no turn per receipt


def test_escape_on_the_receiver_is_reported_cancelled(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(launch, start_fake, pty_dirs, "beta", text_response("slow", delay=60))
    send_from(a, instance_id(a, "beta"), "a long task", "tell beta")
    who = f"beta (pid {b.app.app_pid})"
    a.app.wait_for(f"⇄ {who} started your message")
    b.app.press("escape")
    a.app.wait_for(f'⇄ {who} cancelled your message #1 "a long task": stopped by the receiver\'s')


def test_a_receiver_killed_mid_task_shows_gone_and_cancel_says_so(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(launch, start_fake, pty_dirs, "beta", text_response("slow", delay=60))
    send_from(a, instance_id(a, "beta"), "a long task", "tell beta")
    who = f"beta (pid {b.app.app_pid})"
    a.app.wait_for(f'⇄ {who} started your message #1 "a long task"')
    b.app.signal(signal.SIGKILL)  # no final receipt; its manifest stays, naming a dead pid
    b.app.wait_exit()
    submit(a.app, "/agents sent")
    a.app.wait_for(f"→ {who} · gone ·")
    submit(a.app, "/agents cancel 1")
    a.app.wait_for(f"the receiver is gone: {who} no longer runs")
    assert "Connection refused" not in a.app.all_text()


def test_the_receiver_leaving_with_the_message_queued_is_reported_dropped(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a, b = hand_over(launch, start_fake, pty_dirs)
    who = f"beta (pid {b.app.app_pid})"
    submit(b.app, "/quit")
    b.app.wait_for("leaving drops it")
    b.app.press("ctrl-d")
    assert b.app.wait_exit() == 0
    a.app.wait_for(
        f'⇄ {who} dropped your message #1 "rename users.name": the receiver exited before running'
    )
    submit(a.app, "/agents sent")
    a.app.wait_for(f"→ {who} · dropped ·")


def test_a_version_1_peer_takes_the_task_and_sends_no_receipts(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    with ZshPeer(Path(pty_dirs.relay), project="digest-zsh") as zsh:
        send_from(a, zsh.instance_id, "weekly digest", "tell the zsh agent")
        a.app.wait_for("accepted (queue position 1) by digest-zsh")
        a.app.wait_for("this peer sends no receipts")
        submit(a.app, "/agents sent")
        a.app.wait_for("· accepted (this peer sends no receipts) ·")
        assert [s for _, s in zsh.requests() if s != "pong"] == ["accepted"]


def test_the_receiver_holds_approves_and_denies_and_the_sender_is_told(
    launch: Launch, start_fake: StartFake, pty_dirs: PtyDirs
) -> None:
    a = start_agent(launch, start_fake, pty_dirs, "alpha")
    b = start_agent(launch, start_fake, pty_dirs, "beta", text_response("Done in beta."))
    who = f"beta (pid {b.app.app_pid})"
    submit(b.app, "/agents hold")
    b.app.wait_for("Relayed messages are held")
    submit(a.app, "/send @beta first task")
    a.app.wait_for(f'⇄ {who} holds your message #1 "first task" for its user')
    b.app.wait_for("Relayed message 1 from alpha")
    submit(b.app, "/agents inbox")
    b.app.wait_for(re.compile(r"1\. held +alpha \(pid \d+\) · verified · .* first task"))
    submit(b.app, "/agents approve 1")
    a.app.wait_for(f'⇄ {who} started your message #1 "first task"')
    a.app.wait_for(f'⇄ {who} completed your message #1 "first task"')
    a.app.wait_for("Done in beta.")
    submit(a.app, "/send @beta second task")
    b.app.wait_for("Relayed message 2 from alpha")
    submit(b.app, "/agents deny 2")
    b.app.wait_for("denied: removed without running")
    a.app.wait_for(f'⇄ {who} denied your message #2 "second task"')
    assert len(b.fake.chat_requests()) == 1  # only the approved message reached the model
    assert a.fake.chat_requests() == []  # /send needs no model on the sender's side
