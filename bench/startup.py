"""Start-up benchmark: spawn -> published manifest, idle memory, import cost.
Run ``python -m bench.startup [--rounds N] [--idle S]`` from the repository root.

Each row is measured ``--rounds`` times (default 7), the rows interleaved in a fresh random
order each round so that they share the machine's load, and printed as the median and the
spread (min-max). Nothing is asserted.

- ``python -c pass``: the baseline. Wall time from spawn to exit; RSS as it ends (read by a
  twin ``python -c`` that prints its own ``VmRSS`` from ``/proc/self/status``).
- a plain-Python listener (a script in this file): binds a Unix socket, publishes a JSON
  manifest atomically (temp file + rename), then idles. Spawn -> manifest published, and
  ``VmRSS`` from ``/proc/PID/status`` after ``--idle`` seconds.
- the Zsh peer's stand-in (``tests/relay/zsh_peer.py``, Python: the Zsh implementation itself
  is not in this repository), the same two figures. A row that cannot run says why.
- zcoder, interactive, in a pty (as the pty tests start it: private ``ZCODER_HOME``,
  workspace, runtime and relay directories, the fake Ollama of ``tests/fakes``): spawn ->
  its manifest published in the relay directory (the placeholder that reserves the name
  does not count), then ``VmRSS`` after ``--idle`` seconds; then Ctrl-D.
- ``import zcoder.app.main`` in a fresh interpreter: its time (measured inside the child,
  so without the interpreter's own start) and how many modules are then in
  ``sys.modules`` (``python -c pass`` has the figure in brackets).

The children import this checkout's ``src`` (``PYTHONPATH``), whatever is installed, with
their bytecode cached in a directory of their own (``PYTHONPYCACHEPREFIX``, filled by a first
round that is not kept), as an installed zcoder has it, even when the environment says
``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect

from tests.ui.pty_processes import FakeOllamaProcess

REPO = Path(__file__).resolve().parents[1]
MODEL = "qwen3-coder:latest"
_POLL = 0.001
BASELINE = "python -c pass (baseline)"

# The plain-Python listener: what a relay peer needs to be found, and nothing else.
LISTENER = """\
import json, os, socket, sys, time
d = sys.argv[1]
name = f"a-{os.getpid()}-1"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(d, name + ".sock"))
s.listen(16)
tmp = os.path.join(d, ".tmp-" + name)
with open(tmp, "w") as f:
    json.dump({"protocol": 1, "instance_id": name[2:], "pid": os.getpid()}, f)
os.rename(tmp, os.path.join(d, name + ".json"))
while True:
    time.sleep(3600)
"""

RSS_AT_EXIT = """\
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(line.split()[1])
"""

IMPORT_PROBE = """\
import sys, time
t = time.perf_counter()
import zcoder.app.main
print(time.perf_counter() - t, len(sys.modules))
"""


def child_env(**extra: str) -> dict[str, str]:
    """The environment without the user's zcoder settings, importing this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCODER_", "OLLAMA_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO / "src"), str(REPO), env.get("PYTHONPATH", "")) if p
    )
    return {**env, **extra}


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def published(relay_dir: Path) -> bool:
    """A manifest with JSON in it is in ``relay_dir`` (not an empty reservation)."""
    for entry in os.scandir(relay_dir):
        if entry.name.startswith("a-") and entry.name.endswith(".json"):
            with contextlib.suppress(OSError, ValueError):
                json.loads(Path(entry.path).read_bytes())
                return True
    return False


def wait_published(relay_dir: Path, start: float, alive: Callable[[], bool]) -> float:
    """Seconds from ``start`` until a manifest is published; polled every millisecond."""
    deadline = start + 30
    while not published(relay_dir):
        if not alive():
            raise RuntimeError("the process ended before publishing a manifest")
        if time.perf_counter() > deadline:
            raise TimeoutError("no manifest within 30 s")
        time.sleep(_POLL)
    return time.perf_counter() - start


@contextmanager
def private_dirs() -> Iterator[Path]:
    """A short 0700 directory with a 0700 ``relay`` directory in it."""
    root = Path(tempfile.mkdtemp(prefix="zbs", dir="/tmp"))
    try:
        (root / "relay").mkdir(mode=0o700)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the rows -------------------------------------------------------------------------------

Sample = tuple[float, float]  # (seconds, RSS in MB)


def python_pass() -> Sample:
    """Wall time of ``python -c pass``; RSS from a twin that reads its own ``VmRSS`` as it
    ends (``ru_maxrss`` of a child counts the forking parent's pages: useless here)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=child_env(), check=True)
    elapsed = time.perf_counter() - start
    twin = subprocess.run(
        [sys.executable, "-c", RSS_AT_EXIT], env=child_env(), capture_output=True, check=True
    )
    return elapsed, int(twin.stdout) / 1024


def listener_process(argv: list[str], idle: float, stdin: int | None = None) -> Sample:
    """Spawn ``argv`` (``{relay}`` replaced by a fresh relay directory); time its manifest."""
    with private_dirs() as root:
        relay = root / "relay"
        args = [a.replace("{relay}", str(relay)) for a in argv]
        start = time.perf_counter()
        proc = subprocess.Popen(
            args, env=child_env(), cwd=REPO, stdin=stdin, stdout=subprocess.DEVNULL
        )
        try:
            elapsed = wait_published(relay, start, lambda: proc.poll() is None)
            time.sleep(idle)
            return elapsed, vm_rss_mb(proc.pid)
        finally:
            proc.kill()
            proc.wait()


def plain_listener(idle: float) -> Sample:
    return listener_process([sys.executable, "-c", LISTENER, "{relay}"], idle)


def zsh_stand_in(idle: float) -> Sample:
    argv = [sys.executable, "-m", "tests.relay.zsh_peer", "--relay-dir", "{relay}"]
    return listener_process(argv, idle, stdin=subprocess.PIPE)


def zcoder_interactive(fake_url: str, idle: float) -> Sample:
    with private_dirs() as root:
        for name in ("home", "runtime", "ws"):
            (root / name).mkdir(mode=0o700)
        env = child_env(
            TERM="xterm-256color",
            PROMPT_TOOLKIT_NO_CPR="1",
            HOME=str(root / "home"),
            ZCODER_HOME=str(root / "home" / "zcoder"),
            XDG_RUNTIME_DIR=str(root / "runtime"),
            ZCODER_RELAY_DIR=str(root / "relay"),
            OLLAMA_HOST=fake_url,
            ZCODER_MODEL=MODEL,
        )
        argv = ["-m", "zcoder", "-w", str(root / "ws")]
        start = time.perf_counter()
        child = pexpect.spawn(
            sys.executable, argv, env=env, cwd=str(root / "ws"), dimensions=(40, 120)
        )

        def alive() -> bool:  # and drain the pty, so that the app never blocks writing
            with contextlib.suppress(pexpect.TIMEOUT, pexpect.EOF):
                child.read_nonblocking(65536, timeout=0)
            return bool(child.isalive())

        try:
            elapsed = wait_published(root / "relay", start, alive)
            until = time.perf_counter() + idle
            while time.perf_counter() < until:
                alive()
                time.sleep(0.01)
            rss = vm_rss_mb(child.pid)
            child.send("\x04")  # Ctrl-D on the empty input: the app's own exit
            deadline = time.monotonic() + 10
            while alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            return elapsed, rss
        finally:
            child.close(force=True)


def import_probe() -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE], env=child_env(), capture_output=True, check=True
    )
    seconds, modules = out.stdout.split()
    return float(seconds), int(modules)


def modules_of_pass() -> int:
    probe = "import sys; print(len(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], env=child_env(), capture_output=True)
    return int(out.stdout)


# -- the report -------------------------------------------------------------------------------


def spread(values: list[float], scale: float, unit: str) -> str:
    scaled = [v * scale for v in values]
    low, mid, high = min(scaled), statistics.median(scaled), max(scaled)
    return f"{mid:6.1f} {unit} ({low:.1f}-{high:.1f})"


def zsh_note() -> str:
    zsh = shutil.which("zsh")
    where = f"zsh is at {zsh}" if zsh else "zsh is not installed"
    return f"the Zsh implementation itself is not in this repository ({where}): not measured"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--idle", type=float, default=1.0, help="seconds idle before RSS")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zbf") as tmp:
        # The children's bytecode is cached, as an installed zcoder has its .pyc files
        # (without them every start compiles all of zcoder first).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        fake = FakeOllamaProcess({"models": [MODEL], "responses": []}, Path(tmp))
        try:
            rows: dict[str, Callable[[], Sample]] = {
                BASELINE: python_pass,
                "plain-Python listener": lambda: plain_listener(args.idle),
                "Zsh peer stand-in (Python)": lambda: zsh_stand_in(args.idle),
                "zcoder, interactive in a pty": lambda: zcoder_interactive(fake.url, args.idle),
            }
            samples: dict[str, list[Sample]] = {name: [] for name in rows}
            imports: list[tuple[float, int]] = []
            for row in rows.values():  # a round not kept: it compiles the bytecode
                row()
            for _ in range(args.rounds):
                order = [*rows, "import"]
                random.shuffle(order)
                for name in order:
                    if name == "import":
                        imports.append(import_probe())
                    else:
                        samples[name].append(rows[name]())
        finally:
            fake.close()
    base_time = statistics.median(s[0] for s in samples[BASELINE])
    base_rss = statistics.median(s[1] for s in samples[BASELINE])
    print(f"start-up, median (min-max) of {args.rounds} rounds; RSS after {args.idle:g} s idle")
    print(f"{'':<30} {'spawn -> manifest':<24} {'RSS':<22} over the baseline")
    for name, values in samples.items():
        times, rss = [s[0] for s in values], [s[1] for s in values]
        if name == BASELINE:
            extra = "(spawn -> exit; RSS at exit)"
        else:
            more_ms = (statistics.median(times) - base_time) * 1000
            extra = f"{more_ms:+6.0f} ms {statistics.median(rss) - base_rss:+6.1f} MB"
        print(f"{name:<30} {spread(times, 1000, 'ms'):<24} {spread(rss, 1, 'MB'):<22} {extra}")
    print(f"  ({zsh_note()})")
    seconds = [i[0] for i in imports]
    modules = statistics.median([i[1] for i in imports])
    print(
        f"{'import zcoder.app.main':<30} {spread(seconds, 1000, 'ms'):<24} "
        f"{modules:.0f} modules (python -c pass: {modules_of_pass()})"
    )
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
