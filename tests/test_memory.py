"""Giving freed memory back (``zcoder.memory``): on glibc, free pages leave the process."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from zcoder.memory import release_free_memory


def _rss_kib() -> int:
    found = re.search(r"Rss:\s+(\d+)", Path("/proc/self/smaps_rollup").read_text())
    assert found is not None
    return int(found.group(1))


def test_freed_pages_go_back_to_the_system() -> None:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "malloc_trim") or not Path("/proc/self/smaps_rollup").exists():
        pytest.skip("not glibc on Linux: release_free_memory does nothing here")
    # 64 MiB in blocks below glibc's mmap threshold, so they come from the heap, each
    # followed by a small block that is kept: the freed ones are holes in the heap, which
    # glibc's own trim (from the top only) cannot give back.
    malloc, free = libc.malloc, libc.free
    malloc.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    blocks, pins = [], []
    for _ in range(1024):
        blocks.append(malloc(64 * 1024))
        ctypes.memset(blocks[-1], 1, 64 * 1024)
        pins.append(malloc(2048))
    for block in blocks:
        free(block)
    before = _rss_kib()
    release_free_memory()
    after = _rss_kib()
    for pin in pins:
        free(pin)
    assert before - after > 32 * 1024
