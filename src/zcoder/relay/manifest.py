"""The manifest file: the spec's version-1 flat JSON object describing one instance.

A manifest is published atomically (private temporary file, then ``rename``) only once the
listener accepts connections, rewritten the same way when a mutable field changes, and
removed first on shut-down. Readers treat it as untrusted data: ``load_manifest`` opens it
without following a symlink, requires a regular file of ours of at most
``MAX_MANIFEST_BYTES`` (whatever its mode: the other implementation's manifests take the
process umask, often 0644, inside the 0700 relay directory), parses strict JSON (no
duplicate keys, no NaN; a trailing newline or none) and validates every version-1 field
and the consistency of the name, ``instance_id``, ``pid`` and ``socket``. Keys it does not
know are ignored: a newer peer may add fields, and a manifest only describes (the ping
decides who is live). Our own manifests carry exactly the version-1 fields.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from zcoder import strict_json
from zcoder.atomic_write import write_file
from zcoder.errors import RelayError
from zcoder.relay.envelope import STATES
from zcoder.relay.limits import (
    MAX_PID,
    MAX_PROJECT_CHARS,
    MAX_TIME,
    MAX_WORKSPACE_CHARS,
    PROTOCOL_VERSION,
)
from zcoder.relay.paths import manifest_name, socket_name
from zcoder.relay.protocol import INSTANCE_ID_RE

__all__ = [
    "MAX_MANIFEST_BYTES",
    "Manifest",
    "load_manifest",
    "publish_manifest",
    "remove_manifest",
]

MAX_MANIFEST_BYTES = 16384
_SHORT = 256  # session id, profile, model
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@attrs.frozen
class Manifest:
    """The spec's version-1 manifest, field for field and in its order."""

    protocol: int
    instance_id: str
    pid: int
    project: str
    workspace: str
    session_id: str
    profile: str
    model: str
    socket: str
    state: str
    started_at: int


class _Bad(Exception):
    """A manifest that is not a usable, consistent version-1 manifest."""


def _text(value: object, high: int, *, low: int = 0) -> bool:
    if type(value) is not str or not low <= len(value) <= high or "\0" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _integer(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "protocol": lambda v: type(v) is int and v == PROTOCOL_VERSION,
    "instance_id": lambda v: type(v) is str and INSTANCE_ID_RE.fullmatch(v) is not None,
    "pid": lambda v: _integer(v, 1, MAX_PID),
    "project": lambda v: _text(v, MAX_PROJECT_CHARS),
    "workspace": lambda v: _text(v, MAX_WORKSPACE_CHARS, low=1) and v.startswith("/"),
    "session_id": lambda v: _text(v, _SHORT),
    "profile": lambda v: _text(v, _SHORT),
    "model": lambda v: _text(v, _SHORT),
    "socket": lambda v: _text(v, MAX_WORKSPACE_CHARS, low=1),
    "state": lambda v: type(v) is str and v in STATES,
    "started_at": lambda v: _integer(v, 0, MAX_TIME),
}
_FIELDS = tuple(a.name for a in attrs.fields(Manifest))


def _validate(obj: object, relay_dir: str, instance_id: str) -> Manifest:
    if type(obj) is not dict:
        raise _Bad("not a JSON object")
    missing = [name for name in _FIELDS if name not in obj]
    if missing:
        raise _Bad(f"version-1 fields missing: {', '.join(missing)}")
    for name in _FIELDS:
        if not _CHECKS[name](obj[name]):
            raise _Bad(f"field {name} has an invalid value")
    manifest = Manifest(**{name: obj[name] for name in _FIELDS})
    if manifest.instance_id != instance_id:
        raise _Bad("instance_id differs from the file name")
    if not instance_id.startswith(f"{manifest.pid}-"):
        raise _Bad("pid differs from the instance id")
    if manifest.socket != os.path.join(relay_dir, socket_name(instance_id)):
        raise _Bad("socket is not this instance's socket in the relay directory")
    return manifest


def _read_bounded(path: str) -> bytes:
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _Bad(f"cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Bad("not a regular file")
        if st.st_uid != os.geteuid():
            raise _Bad(f"owned by uid {st.st_uid}")
        data = os.read(fd, MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise _Bad(f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_MANIFEST_BYTES:
        raise _Bad(f"larger than {MAX_MANIFEST_BYTES} bytes")
    return data


def load_manifest(relay_dir: Path | str, instance_id: str) -> Manifest:
    """Read and check ``a-<instance_id>.json``; ``RelayError`` saying why it is unusable."""
    name = manifest_name(instance_id)
    try:
        if not INSTANCE_ID_RE.fullmatch(instance_id):
            raise _Bad("the name holds no valid instance id")
        directory = os.fspath(relay_dir)
        data = _read_bounded(os.path.join(directory, name))
        try:
            obj = strict_json.loads(data)
        except ValueError as exc:
            raise _Bad(f"not JSON: {exc}") from None
        return _validate(obj, directory, instance_id)
    except _Bad as exc:
        raise RelayError(f"manifest {name!r}: {exc}") from None


def publish_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest`` to ``path`` atomically, mode 0600; ``RelayError`` if impossible."""
    fields = attrs.asdict(manifest)
    try:
        _validate(fields, os.fspath(path.parent), manifest.instance_id)
    except _Bad as exc:
        raise RelayError(f"refusing to publish an invalid manifest: {exc}") from None
    if path.name != manifest_name(manifest.instance_id):
        raise RelayError(f"manifest path {str(path)!r} does not match its instance id")
    data = json.dumps(fields, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    try:
        write_file(path, data, sync=False, prefix=".tmp-", suffix=".json")
    except OSError as exc:
        raise RelayError(f"cannot publish manifest {str(path)!r}: {exc.strerror}") from None


def remove_manifest(path: Path) -> None:
    """Unlink our own manifest (or its empty reservation); idempotent.

    Refuses (``RelayError``) a name outside the grammar, a symlink or a file of another
    owner: cleanup must never remove what it does not own.
    """
    name = path.name
    if not (name.startswith("a-") and name.endswith(".json")):
        raise RelayError(f"{name!r} is not a manifest name")
    if not INSTANCE_ID_RE.fullmatch(name[2:-5]):
        raise RelayError(f"{name!r} is not a manifest name")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise RelayError(f"{str(path)!r} is not our own regular file; left in place")
    path.unlink(missing_ok=True)
