"""``--gguf FILE``: llama.cpp's server for that file, as a child process, for one run.

``local_server(config)`` is a context manager around the whole run (both modes): with no
``--gguf`` it yields ``config`` unchanged and no server; with one it checks the ``local``
extra, reads the file's trained context, starts ``python -m zcoder.localserver.child`` (its
own session, so a Ctrl-C at the terminal is zcoder's, not the server's) and yields
``config`` pointed at it exactly as ``--api openai --host URL/v1 -m NAME`` would, with the
``ChildServer`` (whose ``watch`` wraps the run's model client: a server that died is said
and started again once, on its port, ``localserver/watch.py``). The child is stopped on
every way out (SIGTERM, then SIGKILL after a grace period); should zcoder itself be killed,
the child dies with it (see ``child``). llama.cpp's log goes to a private temporary file: a
failed start is one line (``LocalServerError``) with the log's last line, never the log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

from zcoder.agent.context import DEFAULT_NUM_CTX
from zcoder.agent.servers import LLAMA_CPP
from zcoder.config import Config
from zcoder.errors import LocalServerError, NotGguf
from zcoder.localserver.child import READY
from zcoder.localserver.gguf import read_facts
from zcoder.localserver.signals import exit_on_signals

if TYPE_CHECKING:
    from zcoder.agent.model import ModelClient

__all__ = [
    "EXTRA_MISSING",
    "ChildServer",
    "extra_missing",
    "local_server",
    "window_for",
]

EXTRA_MISSING = "--gguf needs the local extra: pip install 'zcoder[local]'"
_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
_log = logging.getLogger(__name__)


def extra_missing() -> bool:
    """True when xllamacpp (the ``local`` extra) is not installed."""
    return importlib.util.find_spec("xllamacpp") is None


def window_for(trained: int | None, cap: int | None) -> int:
    """The server's ``n_ctx``: the model's trained context capped by ``--context-window``
    (zcoder's default window when none is given or the file does not say)."""
    limit = cap or DEFAULT_NUM_CTX
    return min(trained, limit) if trained else limit


@contextlib.contextmanager
def local_server(config: Config) -> Iterator[tuple[Config, ChildServer | None]]:
    """``config`` as is (and no server), or pointed at a server started for
    ``config.gguf`` (stopped on exit), and that server. Raises ``LocalServerError`` when it
    cannot start, ``KeyboardInterrupt`` on Ctrl-C and ``SystemExit(128 + N)`` on SIGTERM or
    SIGHUP while it starts."""
    if config.gguf is None:
        yield config, None
        return
    if extra_missing():
        raise LocalServerError(EXTRA_MISSING)
    path = config.gguf
    try:
        facts = read_facts(path)
    except (NotGguf, OSError) as exc:
        raise LocalServerError(f"--gguf {path}: {exc}") from None
    n_ctx = window_for(facts.context_length, config.context_window)
    child = ChildServer(config, n_ctx)
    with child as url:
        trained = facts.context_length or "unknown"
        note = f"started for {path.name} in {child.seconds:.1f}s, window {n_ctx} of {trained}"
        kind = LLAMA_CPP.name
        yield attrs.evolve(config, host=f"{url}/v1", server_kind=kind, server_note=note), child


class ChildServer:
    """The child process: started by ``__enter__`` (which returns its URL), always stopped;
    ``restart`` starts it again on the same port (its URL stays true)."""

    def __init__(self, config: Config, n_ctx: int) -> None:
        assert config.gguf is not None
        self._argv = [
            sys.executable,
            "-m",
            "zcoder.localserver.child",
            "--model",
            str(config.gguf),
            "--n-ctx",
            str(n_ctx),
            "--alias",
            config.model,
            "--parent",
            str(os.getpid()),
        ]
        self._deadline = config.first_token_timeout
        self.name = config.gguf.name
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._port = 0  # the OS picks the first; a restart takes the same
        self.seconds = 0.0  # how long the start took

    def watch(self, client: ModelClient, *, restart: bool = True) -> ModelClient:
        """``client`` (of this server) with its failures read against this process,
        which is started again once after it died (unless ``restart`` is false)."""
        from zcoder.localserver.watch import WatchedClient

        return WatchedClient(client, self, restart=restart)

    def __enter__(self) -> str:
        if sys.stderr.isatty():
            sys.stderr.write(f"zcoder: starting llama.cpp for {self.name}...\n")
            sys.stderr.flush()
        started = time.monotonic()
        with exit_on_signals():
            try:
                self._log = tempfile.TemporaryFile(prefix="zcoder-llama-")
                url = self._spawn()
            except BaseException:
                self.close()
                raise
        self.seconds = time.monotonic() - started
        self._port = urlsplit(url).port or 0
        return url

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self) -> str:
        self._popen()
        return self._ready()

    def _popen(self) -> None:
        self._proc = subprocess.Popen(
            [*self._argv, "--port", str(self._port)],
            stdin=subprocess.PIPE,  # its end is the child's signal to go
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # the terminal's Ctrl-C is zcoder's to handle
        )

    def _ready(self) -> str:
        url = self._wait_ready()
        assert self._proc is not None
        _log.info("llama.cpp for %s: pid %d at %s", self.name, self._proc.pid, url)
        return url

    def wait_exit(self, seconds: float) -> int | None:
        """The child's exit status once it has exited (waiting up to ``seconds``: a
        connection it dropped as it died may be seen first), else ``None``. Blocking."""
        proc = self._proc
        if proc is None:
            return None
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def respawn(self) -> None:
        """Start the exited child again, on its port (``ready_again`` waits for it).

        Called on the thread that runs the whole run, never a worker thread: the kernel
        kills the child (``PR_SET_PDEATHSIG``) when the *thread* that started it ends."""
        self._drop(self._proc)
        self._popen()

    def ready_again(self) -> None:
        """Wait until the respawned child serves. Raises ``LocalServerError`` (and leaves
        nothing running) when it does not. Blocking; touches no signal handler."""
        try:
            self._ready()
        except BaseException:
            self._drop(self._proc)
            raise

    def _wait_ready(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        end = time.monotonic() + self._deadline
        seen = b""
        while b"\n" not in seen:
            left = end - time.monotonic()
            if left <= 0:
                raise self._failed(f"not ready after {self._deadline:g}s")
            if select.select([fd], [], [], min(left, 0.25))[0]:
                chunk = os.read(fd, 4096)
                if not chunk:  # the child is gone
                    raise self._failed(f"exited ({self._proc.wait()})")
                seen += chunk
        line = seen.split(b"\n", 1)[0].decode(errors="replace")
        if not line.startswith(READY + " "):
            raise self._failed(f"said {line!r}")
        return line.removeprefix(READY + " ").strip()

    def _failed(self, what: str) -> LocalServerError:
        last = self.last_log_line()
        said = f": {last}" if last else ""
        return LocalServerError(f"llama.cpp's server for {self.name} {what}{said}")

    def last_log_line(self) -> str:
        """The last line llama.cpp logged (cut to 300 characters), or ``""``."""
        if self._log is None:
            return ""
        fd = self._log.fileno()
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, 8192), max(0, size - 8192)).decode(errors="replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""

    def close(self) -> None:
        """Stop the child (SIGTERM, SIGKILL after the grace period) and wait for it."""
        self._drop(self._proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _drop(self, proc: subprocess.Popen[bytes] | None) -> None:
        """Close the child's pipes, stop it (SIGTERM, SIGKILL after the grace period; one
        that exited is only reaped) and wait for it."""
        if proc is None:
            return
        if proc is self._proc:
            self._proc = None
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if proc.poll() is None:  # one already reaped is not signalled: its pid may be reused
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        _log.info("llama.cpp (pid %d) stopped (%s)", proc.pid, proc.returncode)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)  # its own session: nothing of it stays
