"""Start-up benchmark: spawn -> discoverable, idle memory, the small commands, import cost.
Run ``python -m bench.startup [--rounds N] [--idle S] [--against SRC]`` from the repository
root.

Each row is measured ``--rounds`` times (default 7), the rows interleaved in a fresh random
order each round so that they share the machine's load, and printed as the median and the
spread (min-max). Nothing is asserted.

- ``python -c pass``: the baseline of the commands. Wall time from spawn to exit.
- a plain-Python listener (``bench/probes.py``): binds a Unix socket, publishes a JSON
  manifest atomically (temp file + rename), answers pings one at a time. Spawn -> manifest
  published, spawn -> first ``pong`` (pinged from the moment the manifest is there), and
  RSS and PSS (``/proc/PID/smaps_rollup``) after ``--idle`` seconds.
- the Zsh peer's stand-in (``tests/relay/zsh_peer.py``, Python: the Zsh implementation itself
  is not in this repository), the same figures.
- zcoder, interactive, in a pty (as the pty tests start it: private ``ZCODER_HOME``,
  workspace, runtime and relay directories, the fake Ollama of ``tests/fakes``): the same
  figures (the placeholder that reserves the name is no manifest); then Ctrl-D.
- the fixed stack alone (``STACK_PROBE``: Trio, asyncio, prompt_toolkit's app parts, attrs,
  cattrs and httpx after one request to the fake Ollama, no zcoder code): its RSS and PSS
  after ``--idle`` seconds, the floor under zcoder's idle memory.
- ``zcoder --version`` and ``zcoder agents --json`` (one plain-Python listener live in its
  relay directory): wall time from spawn to exit.
- ``import zcoder.app.main`` in a fresh interpreter: its time (measured inside the child,
  so without the interpreter's own start) and how many modules are then in
  ``sys.modules`` (``python -c pass`` has the figure in brackets).

``--against SRC`` measures every zcoder row a second time with another checkout's ``src``
(an older commit, for a before/after in one run), interleaved with the others.

The children import this checkout's ``src`` (``PYTHONPATH``), whatever is installed, with
their bytecode cached in a directory of their own (``PYTHONPYCACHEPREFIX``, filled by a first
round that is not kept), as an installed zcoder has it, even when the environment says
``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import contextlib
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

from bench.probes import LISTENER, manifest, memory_mib, pong, wait_until
from tests.ui.pty_processes import FakeOllamaProcess

REPO = Path(__file__).resolve().parents[1]
MODEL = "qwen3-coder:latest"

# The fixed stack alone, as an idle zcoder holds it and with none of zcoder's own code:
# Trio, asyncio, the parts of prompt_toolkit an app is made of, attrs and cattrs, and httpx
# with an AsyncClient that has made one request (to the fake Ollama, as the warm-up does).
# Its memory is the floor under zcoder's idle figures.
STACK_PROBE = """\
import sys, time
import asyncio, attrs, cattrs, httpx, trio
import prompt_toolkit.application, prompt_toolkit.key_binding, prompt_toolkit.layout
import prompt_toolkit.buffer, prompt_toolkit.styles

async def main():
    async with httpx.AsyncClient() as client:
        await client.get(sys.argv[1] + "/api/tags")
        print("ready", flush=True)
        await trio.sleep_forever()

trio.run(main)
"""

IMPORT_PROBE = """\
import sys, time
t = time.perf_counter()
import zcoder.app.main
print(time.perf_counter() - t, len(sys.modules))
"""

Sample = dict[str, float]  # figure -> value (seconds, MiB, a count)


def child_env(src: Path, **extra: str) -> dict[str, str]:
    """The environment without the user's zcoder settings, importing ``src``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCODER_", "OLLAMA_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(src), str(REPO), env.get("PYTHONPATH", "")) if p
    )
    return {**env, **extra}


@contextmanager
def private_dirs() -> Iterator[Path]:
    """A short 0700 directory with 0700 ``relay``, ``home``, ``runtime`` and ``ws`` in it."""
    root = Path(tempfile.mkdtemp(prefix="zbs", dir="/tmp"))
    try:
        for name in ("relay", "home", "runtime", "ws"):
            (root / name).mkdir(mode=0o700)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def discoverable(relay: Path, start: float, alive: Callable[[], bool], idle: float) -> Sample:
    """Spawn -> manifest, spawn -> first pong, then memory after ``idle`` s (the caller's
    ``alive`` keeps the process going, e.g. drains its pty)."""
    found = wait_until(lambda: manifest(relay), alive, "a manifest")
    at_manifest = time.perf_counter() - start
    wait_until(lambda: pong(found), alive, "a pong")
    at_pong = time.perf_counter() - start
    until = time.perf_counter() + idle
    while time.perf_counter() < until:
        alive()
        time.sleep(0.01)
    rss, pss = memory_mib(int(str(found["pid"])))
    return {"manifest": at_manifest, "pong": at_pong, "rss": rss, "pss": pss}


def listener_process(argv: list[str], idle: float, stdin: int | None = None) -> Sample:
    """Spawn ``argv`` (``{relay}`` replaced by a fresh relay directory) and measure it."""
    with private_dirs() as root:
        relay = root / "relay"
        args = [a.replace("{relay}", str(relay)) for a in argv]
        start = time.perf_counter()
        proc = subprocess.Popen(
            args, env=child_env(REPO / "src"), cwd=REPO, stdin=stdin, stdout=subprocess.DEVNULL
        )
        try:
            return discoverable(relay, start, lambda: proc.poll() is None, idle)
        finally:
            proc.kill()
            proc.wait()


def zcoder_interactive(src: Path, fake_url: str, idle: float) -> Sample:
    with private_dirs() as root:
        env = child_env(
            src,
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
            sample = discoverable(root / "relay", start, alive, idle)
            child.send("\x04")  # Ctrl-D on the empty input: the app's own exit
            deadline = time.monotonic() + 10
            while alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            return sample
        finally:
            child.close(force=True)


def stack_alone(fake_url: str, idle: float) -> Sample:
    """``STACK_PROBE``'s memory after ``idle`` s (from the moment its request is done)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STACK_PROBE, fake_url],
        env=child_env(REPO / "src"),
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError("the stack probe ended before its request")
        time.sleep(idle)
        rss, pss = memory_mib(proc.pid)
        return {"rss": rss, "pss": pss}
    finally:
        proc.kill()
        proc.wait()


def command(argv: list[str], env: dict[str, str]) -> Sample:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return {"wall": time.perf_counter() - start}


def import_probe(src: Path) -> Sample:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE], env=child_env(src), capture_output=True, check=True
    )
    seconds, modules = out.stdout.split()
    return {"wall": float(seconds), "modules": float(modules)}


def modules_of_pass() -> int:
    probe = "import sys; print(len(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=child_env(REPO / "src"), capture_output=True
    )
    return int(out.stdout)


# -- the report -------------------------------------------------------------------------------


def spread(values: list[float], scale: float = 1000, unit: str = "ms") -> str:
    scaled = [v * scale for v in values]
    low, mid, high = min(scaled), statistics.median(scaled), max(scaled)
    return f"{mid:.1f} {unit} ({low:.1f}-{high:.1f})"


def rows_for(
    src: Path, tag: str, fake_url: str, agents_env: dict[str, str], idle: float
) -> dict[str, Callable[[], Sample]]:
    zcoder = [sys.executable, "-m", "zcoder"]
    env = {**child_env(src), **agents_env}
    return {
        f"zcoder{tag}": lambda: zcoder_interactive(src, fake_url, idle),
        f"zcoder --version{tag}": lambda: command([*zcoder, "--version"], child_env(src)),
        f"zcoder agents --json{tag}": lambda: command([*zcoder, "agents", "--json"], env),
        f"import zcoder.app.main{tag}": lambda: import_probe(src),
    }


def report(samples: dict[str, list[Sample]], tags: list[str], args: argparse.Namespace) -> None:
    def col(row: str, figure: str, scale: float = 1000, unit: str = "ms") -> str:
        return spread([s[figure] for s in samples[row]], scale, unit) if row in samples else ""

    heads = [f"zcoder{t}" for t in tags]
    print(f"start-up: median (min-max) of {args.rounds} rounds, interleaved; memory after")
    print(f"{args.idle:g} s idle. Goals (issue 27): discoverable <= 200 ms, agents --json")
    print("<= 120 ms, idle RSS / PSS <= 40 / 30 MiB.")
    width = 30
    if len(tags) > 1:
        print(f"(against): {args.against}")
    print(f"{'figure':<28}" + "".join(f"{h:<{width}}" for h in heads) + "plain Python")
    plain, stand_in = "plain-Python listener", "Zsh peer stand-in (Python)"
    lines = [
        ("spawn -> discoverable (pong)", "", "pong", plain),
        ("spawn -> manifest", "", "manifest", plain),
        ("zcoder --version wall", " --version", "wall", "python -c pass"),
        ("zcoder agents --json wall", " agents --json", "wall", "python -c pass"),
    ]
    for label, kind, figure, base in lines:
        cells = [col(f"zcoder{kind}{t}", figure) for t in tags]
        print(f"{label:<28}" + "".join(f"{c:<{width}}" for c in cells) + col(base, figure))
    for label, figure in (("idle RSS", "rss"), ("idle PSS", "pss")):
        cells = [col(f"zcoder{t}", figure, 1, "MiB") for t in tags]
        print(
            f"{label:<28}" + "".join(f"{c:<{width}}" for c in cells) + col(plain, figure, 1, "MiB")
        )
    stack = "the stack alone"
    print(
        f"  the fixed stack alone, no zcoder code (Trio, asyncio, prompt_toolkit, attrs, cattrs,"
        f"\n  httpx after one request): RSS {col(stack, 'rss', 1, 'MiB')},"
        f" PSS {col(stack, 'pss', 1, 'MiB')}"
    )
    cells = [col(f"import zcoder.app.main{t}", "wall") for t in tags]
    print(f"{'import zcoder.app.main':<28}" + "".join(f"{c:<{width}}" for c in cells))
    counts = [
        statistics.median(s["modules"] for s in samples[f"import zcoder.app.main{t}"]) for t in tags
    ]
    cells = [f"{c:.0f}" for c in counts]
    print(
        f"{'  modules then loaded':<28}"
        + "".join(f"{c:<{width}}" for c in cells)
        + f"python -c pass: {modules_of_pass()}"
    )
    for name in (stand_in,):
        figures = ", ".join(
            f"{label} {col(name, f, s, u)}"
            for label, f, s, u in (
                ("pong", "pong", 1000, "ms"),
                ("RSS", "rss", 1, "MiB"),
                ("PSS", "pss", 1, "MiB"),
            )
        )
        print(f"{name}: {figures}")
    zsh = shutil.which("zsh")
    where = f"zsh is at {zsh}" if zsh else "zsh is not installed"
    print(f"  (the Zsh implementation itself is not in this repository ({where}): not measured)")
    print(f"load average: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--idle", type=float, default=1.0, help="seconds idle before memory")
    parser.add_argument("--against", type=Path, help="another checkout's src, measured too")
    args = parser.parse_args()
    sources = [(REPO / "src", "")]
    if args.against:
        sources.append((args.against.resolve(), " (against)"))
    with tempfile.TemporaryDirectory(prefix="zbf") as tmp, private_dirs() as agents_dirs:
        # The children's bytecode is cached, as an installed zcoder has its .pyc files
        # (without them every start compiles all of zcoder first).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        fake = FakeOllamaProcess({"models": [MODEL], "responses": []}, Path(tmp))
        peer = subprocess.Popen([sys.executable, "-c", LISTENER, str(agents_dirs / "relay")])
        agents_env = {
            "ZCODER_RELAY_DIR": str(agents_dirs / "relay"),
            "ZCODER_HOME": str(agents_dirs / "home"),
            "XDG_RUNTIME_DIR": str(agents_dirs / "runtime"),
        }
        try:
            rows: dict[str, Callable[[], Sample]] = {
                "python -c pass": lambda: command(
                    [sys.executable, "-c", "pass"], child_env(REPO / "src")
                ),
                "plain-Python listener": lambda: listener_process(
                    [sys.executable, "-c", LISTENER, "{relay}"], args.idle
                ),
                "the stack alone": lambda: stack_alone(fake.url, args.idle),
                "Zsh peer stand-in (Python)": lambda: listener_process(
                    [sys.executable, "-m", "tests.relay.zsh_peer", "--relay-dir", "{relay}"],
                    args.idle,
                    stdin=subprocess.PIPE,
                ),
            }
            for src, tag in sources:
                rows.update(rows_for(src, tag, fake.url, agents_env, args.idle))
            samples: dict[str, list[Sample]] = {name: [] for name in rows}
            for row in rows.values():  # a round not kept: it compiles the bytecode
                row()
            for _ in range(args.rounds):
                order = list(rows)
                random.shuffle(order)
                for name in order:
                    samples[name].append(rows[name]())
        finally:
            peer.kill()
            peer.wait()
            fake.close()
    report(samples, [tag for _, tag in sources], args)


if __name__ == "__main__":
    main()
