"""Every test runs with private ZCODER_HOME, runtime and relay dirs, never the user's own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short private temp dir: AF_UNIX socket paths are limited to about 100 bytes."""
    path = Path(tempfile.mkdtemp(prefix="zc", dir="/tmp"))
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("env")
    home = root / "home"
    home.mkdir()
    runtime = Path(tempfile.mkdtemp(prefix="zr", dir="/tmp"))
    os.chmod(runtime, 0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ZCODER_HOME", str(root / "zhome"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.setenv("ZCODER_RELAY_DIR", str(runtime / "agents"))
    for var in (
        "OLLAMA_HOST",
        "ZCODER_HOST",
        "ZCODER_API",
        "ZCODER_API_KEY",
        "ZCODER_MODEL",
        "ZCODER_PROFILE",
        "ZCODER_COMMAND_POLICY",
        "ZCODER_WORKSPACE",
        "ZCODER_RELAY",
        "NO_COLOR",
    ):
        monkeypatch.delenv(var, raising=False)
    # Every other setting of ours, present or future, is the user's, never a test's.
    for var in [v for v in os.environ if v.startswith("ZCODER_") and v != "ZCODER_HOME"]:
        if var not in ("ZCODER_RELAY_DIR",):
            monkeypatch.delenv(var, raising=False)
    try:
        yield root
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
