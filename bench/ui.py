"""Interactive UI benchmark: Escape latency, streaming rate, typing lag. ``python bench/ui.py``

Runs the real ``zcoder`` in a pty against the fake Ollama (``tests.fakes.ollama_server``)
and reads the raw terminal output, as a user's terminal would receive it:

- Escape latency: Escape pressed during a slow stream -> ``stopped`` drawn in the status bar.
- Streaming rate: a reply of N chunks sent as fast as the fake can -> the last chunk drawn;
  tokens/s compared with a bare HTTP client reading the same stream (the fake's own rate).
- Typing lag while streaming: a key typed during a ~500 tokens/s stream -> its echo drawn.

Not a test: prints figures (percentiles). Needs no real Ollama and no network.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parents[1]
MODEL = "qwen3-coder:latest"


def _chunks(n: int, prefix: str) -> list[dict[str, str]]:
    return [{"content": f"{prefix}{i} "} for i in range(n)] + [{"content": "END_MARK"}]


class Fake:
    """The fake Ollama in a subprocess; ``set`` replaces its script."""

    def __init__(self, workdir: Path) -> None:
        script = workdir / "script.json"
        script.write_text(json.dumps({"responses": [{"chunks": [{"content": "hi"}]}]}))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.ollama_server", "--script", str(script)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().decode().split()[1]

    def set(self, chunks: list[dict[str, str]], delay: float) -> None:
        body = {"models": [MODEL], "responses": [{"chunks": chunks, "delay": delay}]}
        req = urllib.request.Request(
            self.url + "/_fake/script", data=json.dumps(body).encode(), method="POST"
        )
        urllib.request.urlopen(req, timeout=5).read()

    def raw_rate(self, n: int) -> float:
        """Tokens/s a bare client gets from the fake (the ceiling for the UI)."""
        self.set(_chunks(n, "t"), 0.0)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}
        req = urllib.request.Request(self.url + "/api/chat", data=json.dumps(body).encode())
        start = time.perf_counter()
        with urllib.request.urlopen(req, timeout=60) as resp:
            lines = sum(1 for _ in resp)
        return (lines - 1) / (time.perf_counter() - start)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


class Screen:
    """zcoder in a pty; a reader thread keeps every byte it writes, with arrival times."""

    def __init__(self, fake_url: str, root: Path, debug_log: str = "") -> None:
        env = {
            **os.environ,
            "TERM": "xterm-256color",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "ZCODER_HOME": str(root / "home"),
            "XDG_RUNTIME_DIR": str(root),
            "ZCODER_RELAY": "off",
            "OLLAMA_HOST": fake_url,
            "ZCODER_MODEL": MODEL,
        }
        (root / "ws").mkdir()
        argv = ["-m", "zcoder", "--no-warmup", "-w", str(root / "ws")]
        if os.environ.get("BENCH_PROFILE"):
            argv = ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"], *argv]
        if debug_log:
            argv += ["--debug-log", debug_log]
        self.child = pexpect.spawn(
            sys.executable, argv, env=env, dimensions=(40, 120), cwd=str(REPO)
        )
        self.child.delaybeforesend = None  # pexpect sleeps 50 ms before each send otherwise
        self.data = bytearray()
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = self.child.read_nonblocking(65536, timeout=None)
            except (pexpect.EOF, pexpect.TIMEOUT, OSError):
                return
            with self.lock:
                self.data += chunk

    def mark(self) -> int:
        with self.lock:
            return len(self.data)

    def find(self, needle: str, since: int) -> int:
        with self.lock:
            return self.data.find(needle.encode(), since)

    def wait(self, needle: str, since: int, timeout: float = 30.0) -> float:
        """Seconds (perf_counter) when ``needle`` showed after offset ``since``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.find(needle, since) >= 0:
                return time.perf_counter()
            time.sleep(0.001)
        raise TimeoutError(f"{needle!r} not drawn within {timeout}s")

    def send(self, text: str) -> None:
        self.child.send(text)

    def close(self) -> None:
        """Ctrl-D on the empty input, and wait for the exit (the pump thread reads the
        output, so this must not ``expect`` it)."""
        self.child.send("\x15\x04")
        deadline = time.monotonic() + 15
        while self.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.child.isalive():
            self.child.terminate(force=True)
            raise RuntimeError("zcoder did not exit on Ctrl-D")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def escape_latency(fake: Fake, screen: Screen, rounds: int) -> list[float]:
    fake.set(_chunks(2000, "w"), 0.02)
    out = []
    for _ in range(rounds):
        start = screen.mark()
        screen.send("go\r")
        screen.wait("w5 ", start)
        time.sleep(0.2)
        at = screen.mark()
        sent = time.perf_counter()
        screen.send("\x1b")
        out.append(screen.wait("stopped", at) - sent)
        time.sleep(0.3)  # let the stopped turn settle before the next one
    return out


def stream_rate(fake: Fake, screen: Screen, n: int) -> float:
    fake.set(_chunks(n, "s"), 0.0)
    start = screen.mark()
    sent = time.perf_counter()
    screen.send("stream\r")
    done = screen.wait("END_MARK", start, timeout=120)
    screen.wait("ready", screen.find("END_MARK", start), timeout=30)
    return n / (done - sent)


def _type(screen: Screen, keys: int) -> list[float]:
    out = []
    for letter in "абвгдежзийклмнопрстуфхцчшщыэюя"[:keys]:
        at = screen.mark()
        sent = time.perf_counter()
        screen.send(letter)
        out.append(screen.wait(letter, at) - sent)
        time.sleep(0.1)
    screen.send("\x15")  # Ctrl-U: drop the typed letters
    return out


def typing_lag(fake: Fake, screen: Screen, keys: int) -> tuple[list[float], list[float]]:
    """Key echo when idle, then while a ~500 tokens/s stream is drawn."""
    idle = _type(screen, keys)
    fake.set(_chunks(4000, "k"), 0.002)
    start = screen.mark()
    screen.send("type while streaming\r")
    screen.wait("k20 ", start)
    busy = _type(screen, keys)
    screen.send("\x1b")
    screen.wait("stopped", start)
    return idle, busy


@contextmanager
def running(debug_log: str) -> Iterator[tuple[Fake, Screen]]:
    root = Path(tempfile.mkdtemp(prefix="zbui"))
    os.chmod(root, 0o700)
    fake = Fake(root)
    screen = Screen(fake.url, root, debug_log)
    try:
        screen.wait("ready", 0, timeout=30)
        yield fake, screen
    finally:
        try:
            screen.close()
        finally:
            fake.close()


def report(name: str, values: list[float], unit: str = "ms", scale: float = 1000) -> None:
    p50, p95, top = (pct(values, p) * scale for p in (50, 95, 100))
    line = f"{name:<34} p50 {p50:7.1f} {unit}  p95 {p95:7.1f} {unit}  max {top:7.1f} {unit}"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--debug-log", default="", help="pass --debug-log FILE to zcoder")
    args = parser.parse_args()
    with running(args.debug_log) as (fake, screen):
        report("Escape -> 'stopped' drawn", escape_latency(fake, screen, args.rounds))
        rates = [stream_rate(fake, screen, args.tokens) for _ in range(3)]
        ceiling = fake.raw_rate(args.tokens)
        best = max(rates)
        print(
            f"{'streaming rate drawn':<34} {statistics.median(rates):7.0f} tok/s median, "
            f"{best:.0f} best (bare client: {ceiling:.0f} tok/s, ratio {best / ceiling:.2f})",
            flush=True,
        )
        idle, busy = typing_lag(fake, screen, 20)
        report("key echo, idle", idle)
        report("key echo while streaming ~500 tok/s", busy)


if __name__ == "__main__":
    main()
