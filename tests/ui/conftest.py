"""Fixtures for the pty tests: private dirs, a fake Ollama process, zcoder in a pty."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.ui.pty_harness import FakeOllamaProcess, PtyApp

DEFAULT_MODEL = "qwen3-coder:latest"

StartFake = Callable[[Mapping[str, Any]], FakeOllamaProcess]


@attrs.frozen
class PtyDirs:
    """Short private dirs for one test (AF_UNIX socket paths must stay short)."""

    root: Path
    home: Path
    runtime: Path
    relay: Path
    workspace: Path


class Launch:
    """Starts zcoder (or any argv) in a pty; every app started is terminated at teardown.

    The approval guard is off (``ZCODER_APPROVAL_GUARD_MS=0``) unless a test asks for it:
    a test answers a question as soon as it is on screen instead of sleeping for the guard.
    """

    def __init__(self, dirs: PtyDirs) -> None:
        self.dirs = dirs
        self.apps: list[PtyApp] = []

    def env(self, host: str, model: str, extra: Mapping[str, str]) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ZCODER_", "OLLAMA_"))}
        base.pop("NO_COLOR", None)
        return {
            **base,
            "TERM": "xterm-256color",
            "HOME": str(self.dirs.home),
            "ZCODER_HOME": str(self.dirs.home / "zcoder"),
            "XDG_RUNTIME_DIR": str(self.dirs.runtime),
            "ZCODER_RELAY_DIR": str(self.dirs.relay),
            "OLLAMA_HOST": host,
            "ZCODER_MODEL": model,
            "ZCODER_APPROVAL_GUARD_MS": "0",
            **extra,
        }

    def zcoder(
        self,
        host: str,
        *args: str,
        model: str = DEFAULT_MODEL,
        warmup: bool = False,
        guard: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> PtyApp:
        """``guard=True``: the approval guard at its default (the variable unset)."""
        argv = [sys.executable, "-m", "zcoder", "-w", str(self.dirs.workspace), *args]
        if not warmup:
            argv.append("--no-warmup")
        full = self.env(host, model, env or {})
        if guard:
            del full["ZCODER_APPROVAL_GUARD_MS"]
        return self.argv(argv, env=full)

    def argv(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> PtyApp:
        n = len(self.apps)
        app = PtyApp(
            argv,
            env=env if env is not None else self.env("http://127.0.0.1:9", DEFAULT_MODEL, {}),
            cwd=self.dirs.workspace,
            stty_file=self.dirs.root / f"stty-{n}.txt",
        )
        self.apps.append(app)
        return app


@contextmanager
def private_dirs(prefix: str = "zp") -> Iterator[PtyDirs]:
    """A private home, runtime, relay and workspace under a short /tmp root (socket paths),
    removed after."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    dirs = PtyDirs(root, root / "h", root / "r", root / "r" / "agents", root / "ws")
    for path in (dirs.home, dirs.runtime, dirs.workspace):
        path.mkdir(mode=0o700)
    os.chmod(root, 0o700)
    os.chmod(dirs.runtime, 0o700)
    try:
        yield dirs
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def launching(dirs: PtyDirs) -> Iterator[Launch]:
    """A ``Launch`` whose apps are all ended after."""
    launcher = Launch(dirs)
    try:
        yield launcher
    finally:
        for app in launcher.apps:
            app.terminate()


@pytest.fixture
def pty_dirs() -> Iterator[PtyDirs]:
    with private_dirs() as dirs:
        yield dirs


@pytest.fixture
def launch(pty_dirs: PtyDirs) -> Iterator[Launch]:
    with launching(pty_dirs) as launcher:
        yield launcher


@pytest.fixture
def start_fake(pty_dirs: PtyDirs) -> Iterator[StartFake]:
    """``start_fake(script)`` runs a fake Ollama and returns it (``.url``)."""
    fakes: list[FakeOllamaProcess] = []

    def start(script: Mapping[str, Any]) -> FakeOllamaProcess:
        workdir = pty_dirs.root / f"fake{len(fakes)}"
        workdir.mkdir()
        fake = FakeOllamaProcess(script, workdir)
        fakes.append(fake)
        return fake

    try:
        yield start
    finally:
        for fake in fakes:
            fake.close()


# -- zcoder-specific reading of the screen and scripting of the fake ------------------------

# What the app's screen shows, in one place so the tests read as behaviour.
APPROVAL_QUESTION = re.compile(r"\[y\].*\[n\]")  # the choices line: [y] yes, once ... [n] no
STOPPED = re.compile(r"(?i)\bstopped\b|cancelled")
QUEUED = re.compile(r"(?i)\bqueued\b")
RESUME_HINT = re.compile(r"zcoder --resume \S+")


def status_line(app: PtyApp, *needles: str) -> str | None:
    """The status bar (`` state  model │ profile │ “title” ...``) if it holds every needle."""
    for line in app.screen_text().splitlines():
        if "│ coding │" in line and all(n in line for n in needles):
            return line
    return None


def input_line(app: PtyApp) -> str:
    """The input line as shown (the row just above the status bar), prompt included."""
    lines = app.screen_text().splitlines()
    rows = [i for i, line in enumerate(lines) if "│ coding │" in line]
    return lines[rows[-1] - 1].rstrip() if rows and rows[-1] > 0 else ""


def wait_status(app: PtyApp, *needles: str, timeout: float = 10.0) -> None:
    app.wait_until(
        lambda a: status_line(a, *needles) is not None, f"status bar with {needles}", timeout
    )


def wait_ready(app: PtyApp, model: str = DEFAULT_MODEL) -> None:
    """The app is up: its status bar names the model."""
    wait_status(app, model, timeout=15.0)


def submit(app: PtyApp, text: str) -> None:
    app.send(text)
    app.press("enter")


def text_response(*pieces: str, delay: float = 0.0) -> dict[str, Any]:
    return {"chunks": [{"content": p} for p in pieces], "delay": delay}


def command_response(command: str, *, delay: float = 0.0, say: str = "") -> dict[str, Any]:
    """The model asks to run ``command`` (after saying ``say``)."""
    call = {"name": "run_command", "arguments": {"command": command}}
    chunks: list[dict[str, Any]] = [{"content": say}] if say else []
    return {"chunks": [*chunks, {"tool_calls": [call]}], "delay": delay}


def script(
    *responses: Mapping[str, Any], models: Sequence[str] = (DEFAULT_MODEL,)
) -> dict[str, Any]:
    return {"models": list(models), "responses": list(responses), "repeat_last": True}


def messages_of(request: Mapping[str, Any], role: str) -> list[str]:
    """The contents of the request's messages with ``role``."""
    return [str(m.get("content", "")) for m in request["messages"] if m.get("role") == role]


def wait_requests(fake: FakeOllamaProcess, count: int) -> list[dict[str, Any]]:
    """Wait until the fake has recorded ``count`` chat requests; return them all."""
    deadline = time.monotonic() + 10
    while len(requests := fake.chat_requests()) < count:
        assert time.monotonic() < deadline, f"expected {count} chat requests, got {requests}"
        time.sleep(0.05)
    return requests


# A command that records its pid in the workspace, then sleeps in that same process.
SLEEP_COMMAND = "sh -c 'echo $$ > sleep.pid; exec sleep 30'"


def sleep_pid(workspace: Path) -> int:
    """Wait for ``SLEEP_COMMAND`` to be running; return the sleep's pid."""
    pid_file = workspace / "sleep.pid"
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while b"sleep" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the command never became sleep"
        time.sleep(0.02)
    return pid
