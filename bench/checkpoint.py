"""A checkpoint's cost: ``python -m bench.checkpoint [--files N] [--rounds R]``.

A workspace of ``N`` files (default 10,000: 500 directories of 20 small files, a git
repository with everything committed) gets one first snapshot (its cost printed apart:
every file is hashed once per workspace). Then each round a turn changes three files by a
command: the snapshot before its first change (``before_change``) and the end of the turn
(a second snapshot, the diff and the kept record: ``finish``) are timed, and beside them,
in the same run and on the same tree, a plain ``git status`` of the workspace's own
repository. Printed: median and p90 of each, and the ratio of the snapshot to ``git
status``. The issue's bound: at most 300 ms for a snapshot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio

from zcoder.checkpoint.settings import CheckpointSettings
from zcoder.checkpoint.tracker import Checkpoints

_GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


async def _git(ws: Path, *args: str) -> None:
    await trio.run_process(["git", *args], cwd=ws, env=_GIT_ENV, capture_stdout=True)


def _make_workspace(ws: Path, files: int) -> None:
    per_dir = 20
    for n in range(files):
        d = ws / f"pkg{n // per_dir:04d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{n % per_dir:02d}.py").write_text(f"# module {n}\nVALUE = {n}\n" * 10)
    (ws / ".gitignore").write_text("__pycache__/\n*.log\n")


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:6.1f} ms   p90 {p90 * 1000:6.1f} ms"


async def _timed(work: object) -> float:
    start = time.perf_counter()
    await work  # type: ignore[misc]
    return time.perf_counter() - start


async def _run(root: Path, files: int, rounds: int) -> None:
    ws = root / "ws"
    ws.mkdir()
    _make_workspace(ws, files)
    await _git(ws, "init", "-q")
    await _git(ws, "add", ".")
    await _git(ws, "commit", "-qm", "start")
    cps = Checkpoints(root / "home", ws, CheckpointSettings())
    first = cps.turn("bench", "user", "", "first")
    cold = await _timed(first.before_change(()))
    await first.finish()
    before: list[float] = []
    after: list[float] = []
    status: list[float] = []
    for n in range(rounds):
        status.append(await _timed(_git(ws, "status", "--porcelain")))
        turn = cps.turn("bench", "user", "", f"round {n}")
        before.append(await _timed(turn.before_change(())))
        for k in range(3):
            path = ws / f"pkg{(n * 7 + k) % (files // 20):04d}" / "mod00.py"
            path.write_text(path.read_text() + f"# round {n}\n")
        after.append(await _timed(turn.finish()))
    print(f"workspace: {files} files; {rounds} turns changing 3 files each")
    print(f"first snapshot of the workspace (once): {cold * 1000:.0f} ms")
    print(f"snapshot before a turn's first change: {_ms(before)}")
    print(f"end of the turn (snapshot, diff, kept): {_ms(after)}")
    print(f"git status of the same tree:           {_ms(status)}")
    ratio = statistics.median(before) / statistics.median(status)
    print(f"snapshot / git status (medians): {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="zcoder-bench-cp-"))
    try:
        trio.run(_run, root, args.files, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
