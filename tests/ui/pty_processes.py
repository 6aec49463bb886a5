"""Processes around the pty tests: /proc lookups and the fake Ollama as a subprocess.

Every process a pty test starts carries ``ZCODER_PTY_TEST_TOKEN=<random>`` in its
environment, so ``pids_with_token`` finds it even after it left the pty's process group or
session; ``FakeOllamaProcess`` runs ``python -m tests.fakes.ollama_server`` and talks to its
control endpoints.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "REPO_ROOT",
    "TOKEN_VAR",
    "FakeOllamaProcess",
    "closed_port_url",
    "parent_pid",
    "pids_with_token",
    "process_state",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN_VAR = "ZCODER_PTY_TEST_TOKEN"


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc (``Z`` = zombie), or None when the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def pids_with_token(token: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``token``."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and process_state(int(entry)) not in (None, "Z"):
            found.append(int(entry))
    return found


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was just bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class FakeOllamaProcess:
    """``python -m tests.fakes.ollama_server`` in a subprocess, replaying ``script``."""

    def __init__(self, script: Mapping[str, Any], workdir: Path) -> None:
        script_file = workdir / "ollama-script.json"
        script_file.write_text(json.dumps(script))
        # The child keeps its own copy of the descriptor; ours is closed at once.
        with (workdir / "fake-ollama.err").open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.fakes.ollama_server", "--script", str(script_file)],
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        self.url = self._read_ready()

    def _read_ready(self) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline().decode().strip() if ready else ""
        if not line.startswith("READY "):
            self.close()
            raise RuntimeError(f"fake Ollama did not start: {line!r}")
        return line.split(" ", 1)[1]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
        return json.loads(raw) if raw.strip() else None

    def requests(self) -> list[dict[str, Any]]:
        """The recorded ``/api/chat`` request bodies, oldest first."""
        return list(self._call("GET", "/_fake/requests"))

    def chat_requests(self) -> list[dict[str, Any]]:
        """The recorded chat requests of turns (not loads, which carry no messages, nor
        warm-ups, which ask for one output token)."""
        return [r for r in self.requests() if isinstance(r, dict) and _is_turn(r)]

    def outcomes(self) -> list[str]:
        """How each chat request ended (``complete``, ``client_disconnected``, ...)."""
        return list(self._call("GET", "/_fake/outcomes"))

    def set_script(self, script: Mapping[str, Any]) -> None:
        self._call("POST", "/_fake/script", dict(script))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _is_turn(request: dict[str, Any]) -> bool:
    options = request.get("options")
    warmup = isinstance(options, dict) and options.get("num_predict") == 1
    return bool(request.get("messages")) and not warmup
