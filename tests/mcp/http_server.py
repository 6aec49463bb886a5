"""The demo server (``server_script.py``) over Streamable HTTP in a subprocess on a free
loopback port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# The SDK's HTTP transport leaves httpx2 response generators to the garbage collector when
# its task group is cancelled; Trio's finalizer reports that as a ResourceWarning (ignored
# outside tests by default). Nothing leaks: the generators are finalized.
GC_WARNING = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

SCRIPT = str(Path(__file__).with_name("server_script.py"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The demo server on a free loopback port: its base URL (``http://127.0.0.1:PORT``)
    once it accepts connections, and its process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP test server did not start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(10)
