"""The signals that stop ``--gguf``'s server while it starts (``process.ChildServer``):
SIGTERM and SIGHUP become an exception there, so the half-started child is stopped before
zcoder exits as the signal says. Main thread only (Python's signal handlers live there)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["Signalled", "catch_signals"]


class Signalled(BaseException):
    """SIGTERM or SIGHUP while the server starts: stop it, then exit as the signal says."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def catch_signals() -> dict[int, _Handler]:
    """SIGTERM and SIGHUP raise ``Signalled`` while the server starts (one that is
    ignored, as under nohup, stays ignored); returns the handlers to put back."""
    previous: dict[int, _Handler] = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _raise_signalled)
    return previous


def _raise_signalled(signum: int, frame: FrameType | None) -> None:
    raise Signalled(signum)
