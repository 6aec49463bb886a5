"""Drive a program in a real pseudo-terminal and read its screen like a user would.

``PtyApp`` starts a command under ``sh`` in a pty (pexpect), pumps everything it writes
into a ``pyte`` terminal emulator from a reader thread (which also answers cursor-position
requests, as a real terminal does), and offers ``wait_for``/``send``/``press``. Finished
transcript lines scroll off the 40-line screen, so the emulator keeps a scrollback and the
raw output is kept too. After the program ends the wrapper shell records ``stty -a`` of the
same pty, so a test can check the terminal was restored.

Every process started here carries a random token in its environment; teardown kills the
pty's process group and any process still carrying the token, so nothing is left behind
even when a tool command escaped into its own process group or session.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pexpect
import pyte

from tests.ui.pty_processes import (
    REPO_ROOT,
    TOKEN_VAR,
    FakeOllamaProcess,
    closed_port_url,
    parent_pid,
    pids_with_token,
    process_state,
)

__all__ = [
    "KEYS",
    "REPO_ROOT",
    "FakeOllamaProcess",
    "PtyApp",
    "closed_port_url",
    "pids_with_token",
    "process_state",
]

ROWS, COLS = 40, 120
KEYS: dict[str, str] = {
    "enter": "\r",
    "escape": "\x1b",
    "ctrl-c": "\x03",
    "ctrl-d": "\x04",
    "alt-enter": "\x1b\r",
    "tab": "\t",
    "backspace": "\x7f",
    "up": "\x1b[A",
    "down": "\x1b[B",
}
Where = Literal["screen", "all", "raw"]
# CSI/OSC/other escape sequences, for the plain-text copy of the raw output.
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")


class _Terminal(pyte.HistoryScreen):
    """A screen with scrollback that answers the program's terminal queries."""

    def __init__(self, reply_fd: int) -> None:
        super().__init__(COLS, ROWS, history=5000)
        self._reply_fd = reply_fd

    def write_process_input(self, data: str) -> None:
        # OSError: the program is gone and nobody waits for the answer.
        with contextlib.suppress(OSError):
            os.write(self._reply_fd, data.encode())


def _line_text(line: Mapping[int, Any]) -> str:
    return "".join(line[x].data for x in range(COLS)).rstrip()


class PtyApp:
    """One program in a 40x120 pty, its screen emulated by pyte."""

    def __init__(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, stty_file: Path
    ) -> None:
        self.token = os.urandom(8).hex()
        self.stty_file = stty_file
        full_env = {**env, TOKEN_VAR: self.token}
        # sh stays the pty's session leader: after the program ends it records the terminal
        # modes of the very same pty, then exits with the program's status.
        script = 'f=$1; shift; "$@"; rc=$?; stty -a > "$f" 2>&1; exit $rc'
        self.child = pexpect.spawn(
            "/bin/sh",
            ["-c", script, "sh", str(stty_file), *argv],
            env=full_env,
            cwd=str(cwd),
            dimensions=(ROWS, COLS),
            echo=True,
        )
        self._lock = threading.Lock()
        self._screen = _Terminal(self.child.child_fd)
        self._stream = pyte.ByteStream(self._screen)
        self._raw = bytearray()
        self._eof = threading.Event()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        self._app_pid: int | None = None
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None

    # -- output ---------------------------------------------------------------------------
    def _pump(self) -> None:
        fd = self.child.child_fd
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(fd, 65536)
            except (OSError, ValueError):
                data = b""
            if not data:
                self._eof.set()
                return
            with self._lock:
                self._raw += data
                self._stream.feed(data)

    def screen_text(self) -> str:
        """The 40 visible lines, trailing blanks removed."""
        with self._lock:
            return "\n".join(line.rstrip() for line in self._screen.display).rstrip()

    def all_text(self) -> str:
        """Scrollback followed by the visible screen."""
        with self._lock:
            history = [_line_text(line) for line in self._screen.history.top]
            shown = [line.rstrip() for line in self._screen.display]
        return "\n".join(history + shown).rstrip()

    def raw_text(self) -> str:
        """Everything the program wrote, escape sequences removed."""
        with self._lock:
            text = bytes(self._raw).decode("utf-8", "replace")
        return _ESCAPES.sub("", text).replace("\r", "")

    def raw_bytes(self) -> bytes:
        with self._lock:
            return bytes(self._raw)

    def cursor_hidden(self) -> bool:
        with self._lock:
            return bool(self._screen.cursor.hidden)

    def _text(self, where: Where) -> str:
        if where == "screen":
            return self.screen_text()
        return self.all_text() if where == "all" else self.raw_text()

    def _find(self, pattern: str | re.Pattern[str], text: str) -> str | None:
        if isinstance(pattern, str):
            return pattern if pattern in text else None
        match = pattern.search(text)
        return match.group(0) if match else None

    def wait_for(
        self, pattern: str | re.Pattern[str], timeout: float = 10.0, *, where: Where = "all"
    ) -> str:
        """Poll until ``pattern`` (substring or regex) shows; return the matched text."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._find(pattern, self._text(where))
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not seen in {timeout}s\n{self.describe()}")
            time.sleep(0.02)

    def wait_until(
        self, predicate: Callable[[PtyApp], bool], what: str, timeout: float = 10.0
    ) -> None:
        """Poll until ``predicate(self)`` holds; ``what`` names it in the failure message."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"not seen in {timeout}s: {what}\n{self.describe()}")
            time.sleep(0.02)

    def wait_gone(
        self, pattern: str | re.Pattern[str], timeout: float = 10.0, *, where: Where = "screen"
    ) -> None:
        """Poll until ``pattern`` is no longer shown."""
        deadline = time.monotonic() + timeout
        while self._find(pattern, self._text(where)) is not None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} still shown after {timeout}s\n{self.describe()}")
            time.sleep(0.02)

    def describe(self) -> str:
        """The screen and the end of the scrollback, for assertion messages."""
        history = self.all_text().splitlines()[:-ROWS][-30:]
        return (
            "---- scrollback (last 30 lines) ----\n"
            + "\n".join(history)
            + "\n---- screen ----\n"
            + self.screen_text()
            + "\n---- end ----"
        )

    # -- input ----------------------------------------------------------------------------
    def send(self, text: str) -> None:
        self.child.send(text.encode())

    def press(self, key: str) -> None:
        """Press a named key (see ``KEYS``)."""
        self.child.send(KEYS[key].encode())

    # -- process --------------------------------------------------------------------------
    @property
    def app_pid(self) -> int:
        """The program's pid (the wrapper shell's child)."""
        if self._app_pid is None:
            deadline = time.monotonic() + 10
            while self._app_pid is None:
                self._app_pid = next(
                    (
                        int(p)
                        for p in os.listdir("/proc")
                        if p.isdigit() and parent_pid(int(p)) == self.child.pid
                    ),
                    None,
                )
                if self._app_pid is None and time.monotonic() > deadline:
                    raise AssertionError("the program under the pty never started")
                time.sleep(0.01)
        return self._app_pid

    def signal(self, signum: int) -> None:
        os.kill(self.app_pid, signum)

    def wait_exit(self, timeout: float = 10.0) -> int:
        """Wait for the wrapper (and so the program) to end; return its exit status."""
        deadline = time.monotonic() + timeout
        while self.child.isalive():
            if time.monotonic() > deadline:
                raise AssertionError(f"still running after {timeout}s\n{self.describe()}")
            time.sleep(0.02)
        self._eof.wait(2)
        self.exitstatus, self.signalstatus = self.child.exitstatus, self.child.signalstatus
        return -1 if self.exitstatus is None else int(self.exitstatus)

    def stty(self) -> str:
        """``stty -a`` of the pty after the program ended."""
        return self.stty_file.read_text()

    def assert_terminal_restored(self) -> None:
        """Cooked mode with echo is back and the cursor is visible again."""
        modes = set(self.stty().split())
        assert {"echo", "icanon", "isig"} <= modes, self.stty()
        assert not self.cursor_hidden(), "the cursor was left hidden"

    def hang_up(self) -> None:
        """Close the terminal under the program, as when its window is closed."""
        _ = self.app_pid  # learn it while the wrapper shell is still its parent
        self._stop.set()
        self._reader.join(2)
        # The kernel hangs up the pty's session; pexpect's own SIGHUP/SIGINT to the wrapper
        # may find it gone already, which is fine.
        with contextlib.suppress(pexpect.ExceptionPexpect):
            self.child.close(force=False)

    def terminate(self) -> None:
        """Kill everything this pty started and release the pty; idempotent.

        SIGTERM first (the app's own clean exit) to the pty's process group and to every
        process carrying the token, then SIGKILL for whatever is left after a short grace.
        """
        with contextlib.suppress(OSError):
            os.killpg(self.child.pid, signal.SIGTERM)
        for pid in pids_with_token(self.token):  # also those in other groups or sessions
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 2
        while (left := pids_with_token(self.token)) and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.child.pid, signal.SIGKILL)
        self._stop.set()
        self._reader.join(2)
        self.child.close(force=True)
        if self.exitstatus is None:
            self.exitstatus, self.signalstatus = self.child.exitstatus, self.child.signalstatus
