"""The relay listens before the model server check (``app.main._trio_main``): other
instances find a starting zcoder while it still waits for its model server."""

from __future__ import annotations

import socket
import sys

from tests.ui.conftest import DEFAULT_MODEL, Launch, PtyDirs, wait_ready, wait_status
from zcoder.relay.blocking import discover_blocking


def test_the_relay_answers_while_the_model_server_check_waits(
    launch: Launch, pty_dirs: PtyDirs
) -> None:
    # A host that takes connections and never answers: the check waits for it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.settimeout(20)
        host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        runtime = pty_dirs.root / "rt-silent"
        runtime.mkdir(mode=0o700)
        env = launch.env(host, DEFAULT_MODEL, {"XDG_RUNTIME_DIR": str(runtime)})
        argv = [sys.executable, "-m", "zcoder", "-w", str(pty_dirs.workspace), "--no-warmup"]
        app = launch.argv(argv, env=env)
        conn, _ = silent.accept()  # the server check has begun, and waits on this
        with conn:
            peers = discover_blocking(pty_dirs.relay, exclude_instance_id=None, io_timeout=10)
            assert [p.manifest.pid for p in peers] == [app.app_pid]
            assert peers[0].manifest.model == DEFAULT_MODEL
    wait_ready(app)
    wait_status(app, "relay on")
