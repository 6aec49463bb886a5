"""The signals that stop ``--gguf``'s server while it starts (``process.ChildServer``):
inside ``exit_on_signals`` SIGTERM and SIGHUP raise, so the caller's cleanup stops the
half-started child, and then zcoder exits as the signal says. Main thread only (Python's
signal handlers live there)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = ["exit_on_signals"]


class _Signalled(BaseException):
    """SIGTERM or SIGHUP while the server starts; it never leaves this module."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise inside (one that is ignored, as under nohup, stays
    ignored) and leave as ``SystemExit(128 + signal)``; the handlers are put back."""
    previous: dict[signal.Signals, _Handler] = {}
    for which in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(which) is not signal.SIG_IGN:
            previous[which] = signal.signal(which, _raise_signalled)
    try:
        yield
    except _Signalled as exc:
        raise SystemExit(128 + exc.signum) from None
    finally:
        for which, handler in previous.items():
            signal.signal(which, handler)


def _raise_signalled(signum: int, frame: FrameType | None) -> None:
    raise _Signalled(signum)
