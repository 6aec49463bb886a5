"""The app uses the relay through one object, ``RelayLink`` (issue 8 item 10): no module
but ``app/relay.py`` imports ``RelayService`` or reaches through a link to its service."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "zcoder"
LINK = PACKAGE / "app" / "relay.py"


def _outside_modules() -> list[Path]:
    """Every source module but the link and the relay package itself."""
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != LINK and (PACKAGE / "relay") not in p.parents
    ]


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "zcoder.relay.service":
            found.append(f"{path.name}:{node.lineno} imports the relay service")
        if isinstance(node, ast.Attribute) and node.attr == "service":
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "relay":
                found.append(f"{path.name}:{node.lineno} reaches relay.service")
    return found


def test_only_the_link_reaches_the_relay_service() -> None:
    modules = _outside_modules()
    assert any(p.name == "backend.py" for p in modules)  # the scan sees the app
    assert [o for p in modules for o in _offences(p)] == []


def test_the_scan_catches_a_reach_through_the_link(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("spool = self.relay.service.spool\n", encoding="utf-8")
    assert _offences(sample) == ["sample.py:1 reaches relay.service"]
