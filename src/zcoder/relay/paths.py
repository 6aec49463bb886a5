"""The shared relay directory and this instance's names in it.

The directory is chosen in the spec's order (``ZCODER_RELAY_DIR``,
``$XDG_RUNTIME_DIR/zcoder-agents``, ``${TMPDIR:-/tmp}/zcoder-<uid>-agents``), its parent is
canonicalised, and it is used only when it is a real directory owned by us with no group or
other permission bit. Anything else fails closed with ``UnsafeRelayDir`` naming the reason.

An instance owns two names, ``a-<pid>-<nonce>.sock`` and ``a-<pid>-<nonce>.json``. The manifest
name is reserved by exclusive creation of an empty placeholder; the socket name is reserved
by ``bind()`` itself, which fails when the path exists.
"""

from __future__ import annotations

import os
import secrets
import shlex
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

from zcoder.errors import RelayUnavailable, UnsafeRelayDir
from zcoder.relay.protocol import INSTANCE_ID_RE
from zcoder.relay.settings import RelaySettings

__all__ = [
    "INSTANCE_ID_RE",
    "SUN_PATH_MAX",
    "Reservation",
    "ensure_relay_dir",
    "manifest_name",
    "relay_dir_problem",
    "reserve_instance",
    "select_relay_dir",
    "socket_name",
]

# sockaddr_un.sun_path minus its terminating NUL.
SUN_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107
# The nonce is decimal like the spec's example; it needs no secrecy, only to not collide.
_NONCE_DIGITS = 8
_ATTEMPTS = 16


@attrs.frozen
class Reservation:
    """The names this instance holds in the relay directory."""

    instance_id: str
    socket_path: Path
    manifest_path: Path


def socket_name(instance_id: str) -> str:
    return f"a-{instance_id}.sock"


def manifest_name(instance_id: str) -> str:
    return f"a-{instance_id}.json"


def select_relay_dir(settings: RelaySettings, env: Mapping[str, str]) -> Path:
    """The relay directory the spec's selection order gives (not yet validated)."""
    if settings.dir is not None:
        return settings.dir
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "zcoder-agents"
    tmp = env.get("TMPDIR") or "/tmp"
    return Path(tmp) / f"zcoder-{os.geteuid()}-agents"


def ensure_relay_dir(path: Path, *, create: bool = True) -> Path:
    """Return the canonical relay directory after checking that it is safe to use.

    With ``create=False`` a missing directory is not created and its canonical path is
    returned as is (a reader treats it as "no peers"). Raises ``UnsafeRelayDir``.
    """
    if not path.is_absolute() or path.name in ("", ".", ".."):
        raise UnsafeRelayDir(f"relay directory {str(path)!r} is not an absolute directory path")
    try:
        parent = Path(os.path.realpath(path.parent, strict=True))
    except (OSError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnsafeRelayDir(f"parent of relay directory {str(path)!r}: {reason}") from None
    canonical = parent / path.name
    if create:
        _create_private_dir(canonical)
    try:
        st = os.lstat(canonical)
    except FileNotFoundError:
        if create:
            raise UnsafeRelayDir(f"relay directory {str(canonical)!r} vanished") from None
        return canonical
    except OSError as exc:
        raise UnsafeRelayDir(f"relay directory {str(canonical)!r}: {exc.strerror}") from None
    problem = _unsafe_reason(st)
    if problem:
        raise UnsafeRelayDir(f"relay directory {str(canonical)!r} {problem}{_fix(st, canonical)}")
    return canonical


def relay_dir_problem(canonical: Path) -> str:
    """Why the relay directory that ``ensure_relay_dir`` returned is no longer safe, or
    ``""``: one ``lstat`` (a real directory, ours, no group or other bit, owner rwx), cheap
    enough for every discovery, send and received enqueue."""
    try:
        st = os.lstat(canonical)
    except FileNotFoundError:
        return f"relay directory {str(canonical)!r} was removed"
    except OSError as exc:
        return f"relay directory {str(canonical)!r}: {exc.strerror}"
    problem = _unsafe_reason(st)
    return f"relay directory {str(canonical)!r} {problem}" if problem else ""


def _create_private_dir(path: Path) -> None:
    # mkdir's mode is masked by the umask; 0700 & ~umask never opens group/other bits, and
    # a fchmod through an O_NOFOLLOW descriptor makes it exactly 0700 without a symlink race.
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    except OSError as exc:
        raise UnsafeRelayDir(
            f"cannot create relay directory {str(path)!r}: {exc.strerror}"
        ) from None
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def _fix(st: os.stat_result, path: Path) -> str:
    """How to repair a directory that is ours but too open or closed; nothing otherwise
    (a symlink or another owner's directory is not ours to change)."""
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
        return f" (fix: chmod 700 {shlex.quote(str(path))})"
    return ""


def _unsafe_reason(st: os.stat_result) -> str:
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if mode & 0o077:
        return f"has mode {mode:04o}; group and other permission bits must be clear (0700)"
    if mode & 0o700 != 0o700:
        return f"has mode {mode:04o}; its owner needs read, write and search permission (0700)"
    return ""


def reserve_instance(relay_dir: Path) -> Reservation:
    """Pick a fresh instance id and reserve its names; ``RelayUnavailable`` if impossible."""
    pid = os.getpid()
    for _ in range(_ATTEMPTS):
        instance_id = f"{pid}-{secrets.randbelow(10**_NONCE_DIGITS):0{_NONCE_DIGITS}d}"
        sock = relay_dir / socket_name(instance_id)
        size = len(os.fsencode(sock))
        if size > SUN_PATH_MAX:
            raise RelayUnavailable(
                f"socket path {str(sock)!r} is {size} bytes; this OS allows {SUN_PATH_MAX}"
            )
        manifest = relay_dir / manifest_name(instance_id)
        if os.path.lexists(sock):
            continue
        try:
            fd = os.open(manifest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise RelayUnavailable(f"cannot reserve {str(manifest)!r}: {exc.strerror}") from None
        os.close(fd)
        return Reservation(instance_id=instance_id, socket_path=sock, manifest_path=manifest)
    raise RelayUnavailable(f"no free instance name in {str(relay_dir)!r}")
