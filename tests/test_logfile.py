"""No log record ever reaches the terminal: not a failed write, not a handler-less warning."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zcoder.logfile import QuietFileHandler, install_log


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_record_that_cannot_be_written_is_lost_quietly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    install_log(Path("/dev/full"), level=logging.DEBUG)
    assert isinstance(logging.getLogger().handlers[0], QuietFileHandler)
    logging.getLogger("zcoder.test").warning("this cannot be written: %s", "x" * 100)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_the_plain_handler_would_have_printed_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The failure this module exists for, shown with logging's own handler.
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux)")
    handler = logging.FileHandler("/dev/full")
    try:
        handler.emit(logging.makeLogRecord({"msg": "x"}))
    finally:
        with contextlib.suppress(OSError):  # its close flushes again, and fails again
            handler.close()
    assert "--- Logging error ---" in capsys.readouterr().err


def test_without_a_file_warnings_go_nowhere() -> None:
    # logging.lastResort would print a handler-less warning on stderr: run it for real.
    probe = (
        "import logging; from zcoder.logfile import install_log;"
        "install_log(None, level=logging.WARNING);"
        "logging.getLogger('zcoder.x').warning('must not show')"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stderr == "" and out.stdout == ""


def test_a_log_file_that_cannot_be_opened_changes_nothing(tmp_path: Path) -> None:
    root = logging.getLogger()
    before = root.handlers[:]
    with pytest.raises(OSError):
        install_log(tmp_path / "missing" / "zcoder.log", level=logging.DEBUG)
    assert root.handlers == before


def test_records_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "zcoder.log"
    install_log(path, level=logging.DEBUG)
    logging.getLogger("zcoder.test").debug("hello %d", 7)
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert "DEBUG zcoder.test: hello 7" in path.read_text()
