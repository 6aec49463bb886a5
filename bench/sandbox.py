"""The sandbox's cost per command, beside the same command run plain (prints figures; not a
test).

Runs ``run_command`` through the toolbox, as a turn does, in a workspace that is a copy of
this repository's sources and tests (a git repository of a few hundred files): each command
plain and in the sandbox, alternately, and prints the median wall time of each and the
difference (the target: under 30 ms more). The sandboxed run includes everything a
sandboxed command costs: the walk for the workspace's control files, the lock, bwrap's
namespaces and mounts, and the walk afterwards. Run from the repository root:
``python bench/sandbox.py``.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zcoder.sandbox.plan import Confinement
from zcoder.sandbox.probe import check_sandbox
from zcoder.sandbox.scan import scan_workspace
from zcoder.tools.base import ToolContext
from zcoder.tools.registry import Toolbox, core_tools

ROUNDS = 40
COMMANDS = ("true", "git status --short", "ls -R src | wc -l")


def _workspace(root: Path) -> Path:
    repo = Path(__file__).resolve().parents[1]
    ws = root / "ws"
    for part in ("src", "tests", "docs"):
        shutil.copytree(repo / part, ws / part, ignore=shutil.ignore_patterns("__pycache__"))
    (ws / "AGENTS.md").write_text("Run the tests before you say done.\n")
    quiet = {"capture_output": True, "check": True, "cwd": ws}
    subprocess.run(["git", "init", "-q"], **quiet)  # type: ignore[call-overload]
    subprocess.run(["git", "add", "-A"], **quiet)  # type: ignore[call-overload]
    return ws


async def _time(toolbox: Toolbox, ctx: ToolContext, command: str) -> float:
    start = time.perf_counter()
    result = await toolbox.call("run_command", {"command": command}, ctx)
    elapsed = time.perf_counter() - start
    if not result.text.startswith("Exit code: 0"):
        raise SystemExit(f"{command!r} failed: {result.text[:300]}")
    return elapsed


async def _measure(ws: Path, bwrap: str) -> None:
    toolbox = Toolbox(core_tools())
    plain = ToolContext(workspace=ws)
    plan = Confinement(bwrap=bwrap, workspace=ws, private=(Path("/tmp"), Path("/run")))
    boxed = ToolContext(workspace=ws, sandbox=plan)
    files = len(list(Path(ws).rglob("*")))  # noqa: ASYNC240 - before anything is timed
    print(f"workspace: a git repository of {files} files and directories; {ROUNDS} rounds")
    print(f"{'command':<22} {'plain':>9} {'sandboxed':>10} {'cost':>9}")
    for command in COMMANDS:
        outside: list[float] = []
        inside: list[float] = []
        for _ in range(ROUNDS):  # alternately, so that both meet the same machine
            outside.append(await _time(toolbox, plain, command))
            inside.append(await _time(toolbox, boxed, command))
        a, b = statistics.median(outside) * 1000, statistics.median(inside) * 1000
        print(f"{command:<22} {a:7.1f} ms {b:8.1f} ms {b - a:+7.1f} ms")
    walks = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        scan_workspace(ws)
        walks.append(time.perf_counter() - start)
    print(f"of which the walk for control files: {statistics.median(walks) * 1000:.1f} ms, twice")


def main() -> None:
    found = check_sandbox()
    if not found.works:
        raise SystemExit(f"the sandbox cannot work here: {found.line()}")
    with tempfile.TemporaryDirectory(prefix="zcsb") as tmp:
        trio.run(_measure, _workspace(Path(tmp)), found.bwrap)


if __name__ == "__main__":
    main()
