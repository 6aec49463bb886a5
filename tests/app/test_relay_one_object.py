"""The app uses the relay through one object: only ``app/relay/link.py`` (``RelayLink``)
reaches the relay service or the spool; no other module of ``app/relay/`` is exempt.
Anywhere else in the app, the agent, the UI or the tools: no import of ``RelayService`` or
``Spool``, no attribute named ``service``, ``spool`` or ``_spool`` read on anything
(whatever the variable is called), and no path built with a spool folder's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zcoder.relay.spool.fault import SPOOL_DIRS

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "zcoder"
LINK = PACKAGE / "app" / "relay" / "link.py"
RELAY = PACKAGE / "relay"
_CLASSES = {"RelayService", "Spool"}
_ATTRIBUTES = {"service", "spool", "_spool"}


def _outside_modules() -> list[Path]:
    """Every source module but the relay object and the relay package itself."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p != LINK and RELAY not in p.parents]


def _offences(path: Path) -> list[str]:
    found = []
    where = path.name
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zcoder.relay"):
            for alias in node.names:
                if alias.name in _CLASSES or node.module == "zcoder.relay.service":
                    found.append(f"{where}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in _ATTRIBUTES:
            found.append(f"{where}:{node.lineno} reads .{node.attr}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Constant) and right.value in SPOOL_DIRS:
                found.append(f"{where}:{node.lineno} builds a path into {right.value}/")
    return found


def test_only_the_relay_object_reaches_the_service_and_the_spool() -> None:
    modules = _outside_modules()
    names = {p.name for p in modules}
    # The scan sees the app, and every module of the app's relay package but the link.
    assert {"backend.py", "runner.py", "worker.py", "inbox.py", "sends.py", "outbox.py"} <= names
    assert [o for p in modules for o in _offences(p)] == []


@pytest.mark.parametrize(
    ("source", "offence"),
    [
        ("spool = self.relay.service.spool\n", "sample.py:1 reads .service"),
        ("s = link.service\n", "sample.py:1 reads .service"),
        ("x = anything._spool\n", "sample.py:1 reads ._spool"),
        ("names = os.listdir(root / 'inbox')\n", "sample.py:1 builds a path into inbox/"),
        ("from zcoder.relay.spool.store import Spool\n", "sample.py:1 imports Spool"),
        ("from zcoder.relay.service import RelayStatus\n", "sample.py:1 imports RelayStatus"),
    ],
)
def test_the_scan_catches_any_reach(tmp_path: Path, source: str, offence: str) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(source, encoding="utf-8")
    assert offence in _offences(sample)
