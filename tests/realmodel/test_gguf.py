"""``zcoder --gguf FILE``: zcoder starts llama.cpp's server for the SmolLM2 file itself, as a
child process, and stops it on every way out. Three server starts in all: a one-shot
answer, SIGTERM in the middle of a turn, Ctrl-C while the server is still loading.

The file is reached through a symbolic link with a name of the test's own, so the child is
found in ``/proc`` by its command line and no other test's server is mistaken for it.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.realmodel.llama_server import STARTED_URL

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(240)]


def _argv(gguf: Path, workspace: Path, prompt: str, cap: int) -> list[str]:
    return [
        *(sys.executable, "-m", "zcoder", "--gguf", str(gguf), "-w", str(workspace)),
        *("--max-output-tokens", str(cap), "--temperature", "0", "-p", prompt),
    ]


def _children(gguf: Path) -> list[int]:
    """The processes whose command line names this test's file (the server's child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(gguf).encode() in cmdline and b"zcoder.localserver.child" in cmdline:
            found.append(int(entry.name))
    return found


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(condition: object, seconds: float) -> None:
    assert callable(condition)
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _start(argv: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    with (tmp_path / "stderr").open("w") as stderr:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # no terminal: only the test's signals reach zcoder
        )


def test_one_shot_answer_and_the_server_is_gone_after(gguf: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        _argv(gguf, tmp_path, "Say hi.", 24),
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    took = time.monotonic() - started
    # Answered, or cut at the 24-token cap (said on stderr, exit 1): the model answered.
    assert done.returncode == 0 or "The reply was cut off" in done.stderr, done.stderr
    assert done.stdout.strip(), done.stderr
    match = STARTED_URL.search(done.stderr)
    assert match, done.stderr
    print(f"run took {took:.1f}s; {done.stderr.splitlines()[0]}")
    assert not _children(gguf)
    assert not _listening(int(match.group(1)))


def test_sigterm_during_a_turn_stops_the_server(gguf: Path, tmp_path: Path) -> None:
    prompt = "Write a long story about a lighthouse keeper, in many paragraphs."
    proc = _start(_argv(gguf, tmp_path, prompt, 2000), tmp_path)
    try:
        assert proc.stdout is not None
        first = proc.stdout.read(1)  # the answer streams: the turn is under way
        assert first, (tmp_path / "stderr").read_text()
        assert _children(gguf)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, (tmp_path / "stderr").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    stderr = (tmp_path / "stderr").read_text()
    match = STARTED_URL.search(stderr)
    assert match, stderr
    assert not _children(gguf)
    assert not _listening(int(match.group(1)))


def test_ctrl_c_while_the_server_starts_stops_it(gguf: Path, tmp_path: Path) -> None:
    proc = _start(_argv(gguf, tmp_path, "Say hi.", 8), tmp_path)
    try:
        _wait_for(lambda: _children(gguf), 30)  # the child exists, the model still loads
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, (tmp_path / "stderr").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert "model server:" not in (tmp_path / "stderr").read_text()
    assert not _children(gguf)
