"""zcoder in a real pty: ``--resume ID`` alone brings back the session's workspace and
server, a host without ``/v1`` that speaks the OpenAI-compatible API is used as such, and
no model server at all is one message."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.ui.conftest import (
    DEFAULT_MODEL,
    RESUME_HINT,
    Launch,
    PtyDirs,
    messages_of,
    script,
    submit,
    text_response,
    wait_ready,
)
from tests.ui.pty_harness import PtyApp, closed_port_url

LLAMA_MODEL = "smollm2:135m"


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAI]:
    replies = script(text_response("Noted."), text_response("Resumed."), models=[LLAMA_MODEL])
    with FakeOpenAI(replies) as fake:
        yield fake


def _chat_requests(fake: FakeOpenAI, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while len(fake.requests) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(fake.requests) >= count, fake.requests
    return list(fake.requests)


def _bare(launch: Launch, pty_dirs: PtyDirs, *args: str, cwd_name: str = "elsewhere") -> PtyApp:
    """zcoder with only ``args``: no -w, no host, no model, started in another directory."""
    env = launch.env("unused", DEFAULT_MODEL, {})
    for name in ("OLLAMA_HOST", "ZCODER_MODEL"):
        env.pop(name)
    cwd = pty_dirs.root / cwd_name
    cwd.mkdir(exist_ok=True)
    app = PtyApp(
        [sys.executable, "-m", "zcoder", *args, "--no-warmup"],
        env=env,
        cwd=cwd,
        stty_file=pty_dirs.root / f"stty-bare-{len(launch.apps)}.txt",
    )
    launch.apps.append(app)
    return app


def _first_session(launch: Launch, host: str) -> str:
    app = launch.zcoder(closed_port_url(), "--host", host, model=LLAMA_MODEL)
    wait_ready(app, LLAMA_MODEL)
    submit(app, "remember this")
    app.wait_for("Noted.")
    app.press("ctrl-d")
    assert app.wait_exit() == 0
    return app.wait_for(RESUME_HINT, timeout=2).split()[-1]


def test_resume_id_alone_from_another_directory_reopens_workspace_and_server(
    launch: Launch, pty_dirs: PtyDirs, openai_fake: FakeOpenAI
) -> None:
    v1 = openai_fake.url + "/v1"
    sid = _first_session(launch, v1)
    again = _bare(launch, pty_dirs, "--resume", sid)
    # The header names the session's server and its workspace, and says it opened there.
    again.wait_for(f"llama.cpp at {v1} (the session's server)")
    again.wait_for("opened there")
    assert str(pty_dirs.workspace) in again.all_text()
    wait_ready(again, LLAMA_MODEL)
    submit(again, "and now")
    again.wait_for("Resumed.")
    request = _chat_requests(openai_fake, 2)[-1]
    assert messages_of(request, "user") == ["remember this", "and now"]
    assert "no model server found" not in again.all_text()
    print(f"\nresumed header: {again.all_text().splitlines()[0]}")


def test_resume_id_saved_for_another_workspace_says_how_to_open_it(
    launch: Launch, pty_dirs: PtyDirs, openai_fake: FakeOpenAI
) -> None:
    sid = _first_session(launch, openai_fake.url + "/v1")
    other = pty_dirs.root / "other"
    other.mkdir()
    app = _bare(launch, pty_dirs, "-w", str(other), "--resume", sid)
    assert app.wait_exit() == 1
    said = app.raw_text()
    assert f"session {sid} belongs to workspace {pty_dirs.workspace} (coding profile)" in said
    assert f"run zcoder -w {pty_dirs.workspace} --resume {sid}" in said


def test_host_without_v1_on_an_openai_server_is_used_and_said(
    launch: Launch, openai_fake: FakeOpenAI
) -> None:
    bare = openai_fake.url.removeprefix("http://")
    app = launch.zcoder(closed_port_url(), "--host", bare, model=LLAMA_MODEL)
    app.wait_for(f"llama.cpp at {openai_fake.url}/v1 (found at --host {bare})")
    wait_ready(app, LLAMA_MODEL)
    submit(app, "remember this")
    app.wait_for("Noted.")
    assert "is not an Ollama server" not in app.all_text()
    submit(app, "/quit")
    assert app.wait_exit() == 0


def _something_listens(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_no_server_at_all_is_one_message_and_names_no_host(
    launch: Launch, pty_dirs: PtyDirs
) -> None:
    if any(_something_listens(p) for p in (11434, 8080, 1234, 8000)):
        pytest.skip("a server listens on a port auto-detection tries")
    app = _bare(launch, pty_dirs, cwd_name="ws-none")
    app.wait_for("no model server found (tried")
    wait_ready(app)
    time.sleep(0.5)  # the start-up check has had its say
    raw = app.raw_text()
    assert raw.count("no model server found (tried") == 1, raw
    assert "not reachable" not in raw
    header = app.all_text().splitlines()[0]
    assert header.endswith("no model server found"), header
    assert "11434" not in header
    submit(app, "/quit")
    assert app.wait_exit() == 0
