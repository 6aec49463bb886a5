"""The inbound machine stands on its own: importing it, in a fresh interpreter, loads
neither Trio, prompt_toolkit, the UI nor the app."""

from __future__ import annotations

import json
import subprocess
import sys

_FORBIDDEN = ("trio", "prompt_toolkit", "zcoder.ui", "zcoder.app")

_PROBE = """
import json, sys
import zcoder.relay.inbound
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_by(probe: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    modules: list[str] = json.loads(out.stdout)
    return modules


def _forbidden(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in _FORBIDDEN)]


def test_importing_the_machine_loads_no_trio_prompt_toolkit_ui_or_app() -> None:
    modules = _loaded_by(_PROBE)
    assert "zcoder.relay.inbound.machine" in modules  # the probe imported it
    assert _forbidden(modules) == []


def test_the_check_sees_a_forbidden_import() -> None:
    modules = _loaded_by(_PROBE.replace("import zcoder.relay.inbound", "import trio"))
    assert "trio" in _forbidden(modules)
