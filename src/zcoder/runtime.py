"""The process-private runtime directory (relay spool, scratch files).

``$XDG_RUNTIME_DIR/zcoder-<pid>-<nonce>`` when that directory is ours and private (usually
tmpfs, so spool writes are cheap), else ``${TMPDIR:-/tmp}/zcoder-<uid>-<pid>-<nonce>``.
Created with mode 0700 by exclusive ``mkdir``; removed on every exit path.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["make_runtime_dir", "open_runtime_dir", "remove_runtime_dir"]


def _usable_xdg(env: Mapping[str, str]) -> Path | None:
    raw = env.get("XDG_RUNTIME_DIR")
    if not raw or not os.path.isabs(raw):
        return None
    try:
        st = os.lstat(raw)
    except OSError:
        return None
    private = stat.S_IMODE(st.st_mode) & 0o077 == 0
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and private:
        return Path(raw)
    return None


def make_runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Create and return a fresh private runtime directory for this process."""
    env = os.environ if env is None else env
    pid = os.getpid()
    xdg = _usable_xdg(env)
    for _ in range(8):
        nonce = secrets.token_hex(4)
        if xdg is not None:
            path = xdg / f"zcoder-{pid}-{nonce}"
        else:
            path = Path(env.get("TMPDIR") or "/tmp") / f"zcoder-{os.getuid()}-{pid}-{nonce}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)  # mkdir's mode is masked by umask; make it exact
        return path
    raise FileExistsError("could not reserve a private runtime directory")


def remove_runtime_dir(path: Path) -> None:
    """Remove the directory if it is still ours; idempotent, never follows a symlink."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def open_runtime_dir(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    path = make_runtime_dir(env)
    try:
        yield path
    finally:
        remove_runtime_dir(path)
