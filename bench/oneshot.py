"""One-shot turn overhead against the fake Ollama (prints figures; not a test).

Runs ``zcoder -p`` as a real subprocess for a 1-step turn and an N-step tool turn (each step
a ``read_file`` call, then a final answer) against a zero-delay fake, and prints the median
wall time of each and the extra milliseconds per model step. Run from the repository root:
``python bench/oneshot.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.ollama_server import FakeOllama

STEPS = 20
ROUNDS = 7


def _script(steps: int) -> dict[str, Any]:
    # Varying the path keeps the loop guard from stopping a repeated identical round.
    responses: list[dict[str, Any]] = [
        {"chunks": [{"tool_calls": [{"name": "read_file", "arguments": {"path": f"f{i}.txt"}}]}]}
        for i in range(steps - 1)
    ]
    responses.append({"chunks": [{"content": "done"}]})
    return {"responses": responses, "repeat_last": True}


def _run(steps: int, root: Path) -> float:
    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    for i in range(steps):
        (workspace / f"f{i}.txt").write_text(f"file {i}\n")
    env = dict(os.environ, ZCODER_HOME=str(root / "home"), XDG_RUNTIME_DIR=str(root))
    with FakeOllama(_script(steps)) as fake:
        argv = [sys.executable, "-m", "zcoder", "-p", "go", "--host", fake.url, "--yes"]
        start = time.perf_counter()
        subprocess.run([*argv, "-w", str(workspace)], env=env, capture_output=True, check=True)
        return time.perf_counter() - start


def main() -> None:
    one: list[float] = []
    many: list[float] = []
    with tempfile.TemporaryDirectory(prefix="zcb") as tmp:
        for _ in range(ROUNDS):
            one.append(_run(1, Path(tmp)))
            many.append(_run(STEPS, Path(tmp)))
    t1, tn = statistics.median(one), statistics.median(many)
    print(f"one-shot, 1 model step:  {t1 * 1000:7.1f} ms (median of {ROUNDS})")
    print(f"one-shot, {STEPS} model steps: {tn * 1000:7.1f} ms")
    print(f"overhead per extra step: {(tn - t1) * 1000 / (STEPS - 1):7.2f} ms")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
