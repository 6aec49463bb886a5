"""Where log records go: a file, never the terminal.

The interactive app owns the terminal and the one-shot mode's stderr carries its own lines,
so no log record may reach either. ``logging`` itself breaks that rule in two places: a
handler that fails to write (full disk, a log file on a removed mount) prints a
``--- Logging error ---`` traceback to stderr, and a root logger without handlers sends
warnings to stderr through ``logging.lastResort``. ``install_log`` closes both: records go
to a file through ``QuietFileHandler``, which drops a record it cannot write (and flushes
and closes without raising), or nowhere.
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["LOG_FORMAT", "QuietFileHandler", "install_log"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class QuietFileHandler(logging.FileHandler):
    """A file handler that loses a record it cannot write instead of printing a traceback."""

    def handleError(self, record: logging.LogRecord) -> None:
        # A full disk must not become text over the UI; the record is lost, quietly.
        return

    def flush(self) -> None:
        # logging.FileHandler.close flushes outside handleError: a full disk raises there.
        try:
            super().flush()
        except OSError:
            return

    def close(self) -> None:
        try:
            super().close()
        except OSError:
            return


def install_log(path: Path | None, *, level: int) -> None:
    """Send every log record at ``level`` or above to ``path`` (nowhere when None).

    Raises ``OSError`` when ``path`` cannot be opened for appending, before anything changed.
    """
    handler: logging.Handler
    if path is None:
        handler = logging.NullHandler()
    else:
        handler = QuietFileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level)
