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

# What runs after the relay's start (``app/root.py``: the model clients and the agent, the
# screen): imported once the relay's manifest is published, in a worker thread, so that the
# relay answers while the rest is loaded and the first screen is being made.
AFTER_THE_RELAY = (
    "httpx",
    "zcoder.agent.connect",
    "zcoder.app.backend",
    "zcoder.app.core",
    "zcoder.app.root",
    "zcoder.tools",
    "prompt_toolkit",
    "prompt_toolkit.application",
    "pygments",
    "wcwidth",
    "zcoder.ui.controller",
    "zcoder.ui.terminal",
    "zcoder.ui.render",
    "zcoder.ui.wrap",
    "zcoder.ui.slash",
)

# ``zcoder --version`` and ``zcoder agents``: what they use and no more (argparse; the
# relay's discovery, without the app, the model clients, the screen or an event loop: it
# waits for the pongs with plain blocking sockets, relay/blocking.py).
SMALL_COMMANDS = ("trio", "attrs", "httpx", "prompt_toolkit", "zcoder.config")
AGENTS_NEVER = (
    "trio",
    "cattrs",
    "zcoder.relay.discovery",
    "zcoder.relay.client",
    "zcoder.relay.wire",
    "httpx",
    "prompt_toolkit",
    "zcoder.app",
    "asyncio",
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


def test_the_app_module_leaves_all_but_the_relay_for_after_the_manifest() -> None:
    loaded = modules_after("import zcoder.app.main")
    assert {"trio", "zcoder.app.relay.link", "zcoder.relay.service"} <= loaded
    assert sorted(loaded & set(AFTER_THE_RELAY)) == []


def test_the_rest_loads_the_model_clients_and_the_screen() -> None:
    loaded = modules_after("from zcoder.app.main import _import_the_rest\n_import_the_rest()")
    assert sorted(set(AFTER_THE_RELAY) - loaded) == []


def test_version_loads_only_the_command_line() -> None:
    loaded = modules_after(
        "import contextlib, io\n"
        "from zcoder.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--version'])"
    )
    assert "argparse" in loaded
    assert sorted(loaded & set(SMALL_COMMANDS)) == []


def test_agents_loads_the_discovery_and_not_the_app(tmp_path: Path) -> None:
    relay = tmp_path / "relay"
    relay.mkdir(mode=0o700)
    loaded = modules_after(
        "import contextlib, io, os\n"
        f"os.environ.update(ZCODER_RELAY_DIR={str(relay)!r}, ZCODER_HOME={str(tmp_path)!r})\n"
        "from zcoder.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['agents', '--json']) == 0"
    )
    assert {"zcoder.relay.registry", "zcoder.relay.blocking"} <= loaded
    assert sorted(loaded & set(AGENTS_NEVER)) == []


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
