"""What the interactive app imports before its first screen (docs/architecture.rst,
"Imported late"): not what only a turn or a code block needs. Module lists, not timings;
``python -m bench.startup`` prints the figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Imported on first use, never at start-up: Pygments' lexer table (the first code block),
# httpx's command-line client and what it drags in (never), the agent loop (the first turn
# or warm-up).
LATE = (
    "click",
    "rich",
    "pygments.lexer",
    "pygments.lexers",
    "pygments.plugin",
    "zcoder.agent.loop",
    # The MCP SDK: only when a server is configured (zcoder.mcp.link).
    "mcp",
    "mcp.client.stdio",
    "zcoder.mcp.client",
    "anyio",
)


def modules_after(statement: str) -> set[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    probe = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout))


def test_the_app_module_leaves_first_use_imports_for_later() -> None:
    loaded = modules_after("import zcoder.app.main")
    assert "zcoder.app.main" in loaded
    assert sorted(loaded & set(LATE)) == []


def test_what_is_left_for_later_still_loads_when_used() -> None:
    statement = (
        "import zcoder.app.main\n"
        "from zcoder.ui.markdown import render_markdown\n"
        "render_markdown('```python\\nx = 1\\n```')\n"
        "import httpx\n"
        "assert callable(httpx.main)"
    )
    loaded = modules_after(statement)
    assert "pygments.lexers" in loaded
    assert "click" not in loaded
