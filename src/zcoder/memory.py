"""Giving the memory freed by work back to the system once the app falls idle.

CPython's objects live in memory the C library hands it; what a turn frees (a streamed
response's buffers and decoded chunks, the garbage of the imports after start-up) goes
back to that library's heap, which glibc returns to the system only from its top. An
idle instance, one of several a user keeps running, would hold those pages for nothing:
``malloc_trim(0)`` returns every free page in well under a millisecond (about 0.85 MiB
after start-up; ``python -m bench.startup`` measures idle memory). Where the C library has
no ``malloc_trim`` (not glibc), it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable

__all__ = ["release_free_memory"]

_log = logging.getLogger(__name__)


def _find_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


_TRIM = _find_trim()


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc), else nothing."""
    if _TRIM is not None:
        _TRIM(0)
