"""The child process that runs llama.cpp's server for ``--gguf`` (xllamacpp, in-process
here, never in zcoder's own process).

``python -m zcoder.localserver.child --model FILE --n-ctx N --alias NAME --parent PID
[--port N]`` loads the model, waits until ``GET /health`` answers ``{"status":"ok"}``, prints
``zcoder-local-ready http://127.0.0.1:PORT`` on stdout (the port the OS picked, or the one
given: a restart keeps the address its client knows) and serves
until its stdin ends. It dies with its parent: on Linux the kernel kills it when zcoder dies
(``PR_SET_PDEATHSIG``), and everywhere the end of stdin (the parent's end of the pipe
closes when the parent dies, however it dies) ends it. llama.cpp's log goes to stderr,
which the parent keeps out of the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

__all__ = ["READY", "main"]

READY = "zcoder-local-ready"
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above: go now
        os._exit(1)


def _healthy(url: str) -> bool:
    # No proxy from the environment: the server is on this machine.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{url}/health", timeout=5) as response:
            ok: bool = response.status == 200 and json.loads(response.read()) == {"status": "ok"}
            return ok
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _serve(args: argparse.Namespace) -> None:
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    params: Any = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port  # 0: the OS picks a free one, no race with another instance
    params.n_ctx = args.n_ctx
    params.n_parallel = 1  # one conversation: the whole window for it
    params.use_jinja = True  # the file's own chat template, which renders tool calls
    server = xllamacpp.Server(params)  # returns once the model is loaded
    url = str(server.listening_address)
    while not _healthy(url):
        time.sleep(0.05)
    sys.stdout.write(f"{READY} {url}\n")
    sys.stdout.flush()
    os.dup2(2, 1)  # anything printed later goes to the log, never to a pipe nobody reads
    sys.stdin.read()  # the server runs on its own threads until the parent closes this
    os._exit(0)  # at once: no waiting for the server's threads to wind down


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m zcoder.localserver.child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    _serve(args)


if __name__ == "__main__":
    main()
