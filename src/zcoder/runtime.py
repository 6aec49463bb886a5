"""The process-private runtime directory (relay spool, scratch files).

``$XDG_RUNTIME_DIR/zcoder-<pid>-<nonce>`` when that directory is ours and private (usually
tmpfs, so spool writes are cheap), else ``${TMPDIR:-/tmp}/zcoder-<uid>-<pid>-<nonce>``.
Created with mode 0700 by exclusive ``mkdir``; removed on every exit path. A killed
instance cannot remove its own, which holds the text of the relayed tasks it had queued:
``make_runtime_dir`` first removes such directories of this user (``remove_stale_runtime_dirs``).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "make_runtime_dir",
    "open_runtime_dir",
    "remove_runtime_dir",
    "remove_stale_runtime_dirs",
]

_PID = r"([1-9][0-9]{0,9})"
_NONCE = r"[0-9a-f]{8}"  # secrets.token_hex(4)


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


def _sweep_places(env: Mapping[str, str]) -> list[tuple[Path, re.Pattern[str]]]:
    """Where this user's runtime directories are made, each with its name grammar."""
    tmp = Path(env.get("TMPDIR") or "/tmp")
    places = [(tmp, re.compile(rf"zcoder-{os.getuid()}-{_PID}-{_NONCE}", re.ASCII))]
    xdg = _usable_xdg(env)
    if xdg is not None:
        places.append((xdg, re.compile(rf"zcoder-{_PID}-{_NONCE}", re.ASCII)))
    return places


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # it exists (another user's), or no such pid can be checked: keep
    return True


def remove_stale_runtime_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Remove the runtime directories of instances of this user that are gone; return them.

    Only an entry whose name follows the grammar of its place (``zcoder-<uid>-<pid>-<nonce>``
    in ``$TMPDIR``, ``zcoder-<pid>-<nonce>`` in a usable ``$XDG_RUNTIME_DIR``), that is a real
    directory (``lstat``: never a symlink) owned by us, and whose pid is not a live process
    (``kill(pid, 0)``; a process of another user counts as live) is removed. Anything else
    is left alone, and so is whatever cannot be read or removed."""
    env = os.environ if env is None else env
    removed = []
    for parent, grammar in _sweep_places(env):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            found = grammar.fullmatch(name)
            if found is None or _alive(int(found.group(1))):
                continue
            if _remove_if_ours(parent / name):
                removed.append(parent / name)
    return removed


def make_runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Create and return a fresh private runtime directory for this process, after
    removing those that dead instances left behind."""
    env = os.environ if env is None else env
    remove_stale_runtime_dirs(env)
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
    _remove_if_ours(path)


def _remove_if_ours(path: Path) -> bool:
    """Remove ``path`` when ``lstat`` shows a real directory (never a symlink) owned by us;
    whether it did. Anything that cannot be examined is left alone."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


@contextmanager
def open_runtime_dir(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    path = make_runtime_dir(env)
    try:
        yield path
    finally:
        remove_runtime_dir(path)
