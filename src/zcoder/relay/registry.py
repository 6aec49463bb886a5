"""Manifests in the shared relay directory, and discovery of the live peers they describe.

A version-1 manifest is the spec's flat JSON object, published atomically (private temporary
file, then ``rename``) only once the listener accepts connections. Discovery treats every
manifest as untrusted data: it reads at most ``MAX_MANIFESTS`` files named ``a-*.json`` of at
most ``MAX_MANIFEST_BYTES`` each, skips symlinks and files of other owners, validates every
field and the name/socket/pid consistency, and then believes only a protocol ping answered
``pong`` by the advertised socket for that exact instance id. ``kill -0`` and the file's
contents are never proof of life. One function, ``discover``, serves ``zcoder agents``,
``/list-agents`` and the ``list_agents`` tool.
"""

from __future__ import annotations

import fnmatch
import json
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from zcoder.errors import RelayError
from zcoder.relay import client
from zcoder.relay.envelope import MAX_PROJECT_CHARS, MAX_WORKSPACE_CHARS, STATES, Enqueue
from zcoder.relay.paths import manifest_name, socket_name
from zcoder.relay.protocol import INSTANCE_ID_RE, PROTOCOL_VERSION

__all__ = [
    "MAX_MANIFESTS",
    "MAX_MANIFEST_BYTES",
    "Manifest",
    "Peer",
    "discover",
    "load_manifest",
    "publish_manifest",
    "remove_manifest",
    "sender_is_registered",
]

MAX_MANIFESTS = 128
MAX_MANIFEST_BYTES = 16384
_MAX_PID = 2**31 - 1
_MAX_TIME = 2**53
_SHORT = 256  # session id, profile, model


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


@attrs.frozen
class Peer:
    """A live instance: its manifest and the state its listener reported to our ping."""

    manifest: Manifest
    state: str


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
    "pid": lambda v: _integer(v, 1, _MAX_PID),
    "project": lambda v: _text(v, MAX_PROJECT_CHARS),
    "workspace": lambda v: _text(v, MAX_WORKSPACE_CHARS, low=1) and v.startswith("/"),
    "session_id": lambda v: _text(v, _SHORT),
    "profile": lambda v: _text(v, _SHORT),
    "model": lambda v: _text(v, _SHORT),
    "socket": lambda v: _text(v, MAX_WORKSPACE_CHARS, low=1),
    "state": lambda v: type(v) is str and v in STATES,
    "started_at": lambda v: _integer(v, 0, _MAX_TIME),
}
_FIELDS = tuple(a.name for a in attrs.fields(Manifest))


def _validate(obj: object, relay_dir: Path, instance_id: str) -> Manifest:
    if type(obj) is not dict:
        raise _Bad("not a JSON object")
    if set(obj) != set(_FIELDS):
        raise _Bad(f"fields {sorted(obj)} are not the version-1 fields")
    for name in _FIELDS:
        if not _CHECKS[name](obj[name]):
            raise _Bad(f"field {name} has an invalid value")
    manifest = Manifest(**obj)
    if manifest.instance_id != instance_id:
        raise _Bad("instance_id differs from the file name")
    if not instance_id.startswith(f"{manifest.pid}-"):
        raise _Bad("pid differs from the instance id")
    if manifest.socket != os.fspath(relay_dir / socket_name(instance_id)):
        raise _Bad("socket is not this instance's socket in the relay directory")
    return manifest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate key")
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _read_bounded(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _Bad(f"cannot open: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Bad("not a regular file")
        if st.st_uid != os.geteuid():
            raise _Bad(f"owned by uid {st.st_uid}")
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise _Bad(f"larger than {MAX_MANIFEST_BYTES} bytes")
    return data


def load_manifest(relay_dir: Path, instance_id: str) -> Manifest:
    """Read and check ``a-<instance_id>.json``; ``RelayError`` saying why it is unusable."""
    try:
        if not INSTANCE_ID_RE.fullmatch(instance_id):
            raise _Bad("the name holds no valid instance id")
        data = _read_bounded(relay_dir / manifest_name(instance_id))
        try:
            obj = json.loads(
                data.decode("utf-8"),
                object_pairs_hook=_no_duplicates,
                parse_constant=_reject_constant,
            )
        except (ValueError, RecursionError) as exc:
            raise _Bad(f"not JSON: {exc}") from None
        return _validate(obj, relay_dir, instance_id)
    except _Bad as exc:
        raise RelayError(f"manifest {manifest_name(instance_id)!r}: {exc}") from None


def publish_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest`` to ``path`` atomically, mode 0600; ``RelayError`` if impossible."""
    fields = attrs.asdict(manifest)
    try:
        _validate(fields, path.parent, manifest.instance_id)
    except _Bad as exc:
        raise RelayError(f"refusing to publish an invalid manifest: {exc}") from None
    if path.name != manifest_name(manifest.instance_id):
        raise RelayError(f"manifest path {str(path)!r} does not match its instance id")
    data = json.dumps(fields, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    temp = path.parent / f".tmp-{secrets.token_hex(8)}.json"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:  # ProcessLookupError, or PermissionError: another user's process
        return False
    return True


def sender_is_registered(relay_dir: Path, envelope: Enqueue) -> bool:
    """The spec's sender check: the sender id starts with its pid, a valid manifest for that
    id with the same pid is in the registry, and the process is alive. Not authentication:
    any process of the same user can forge all three."""
    sender = envelope.sender_instance_id
    if not sender.startswith(f"{envelope.sender_pid}-"):
        return False
    try:
        manifest = load_manifest(relay_dir, sender)
    except RelayError:
        return False
    return manifest.pid == envelope.sender_pid and _alive(manifest.pid)


def _candidates(relay_dir: Path, exclude: str | None) -> list[Manifest]:
    """The first ``MAX_MANIFESTS`` manifest names in sorted order (ours left out) that hold
    a valid manifest next to a socket of ours."""
    try:
        names = sorted(n for n in os.listdir(relay_dir) if fnmatch.fnmatchcase(n, "a-*.json"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RelayError(
            f"cannot read relay directory {str(relay_dir)!r}: {exc.strerror}"
        ) from None
    skip = None if exclude is None else manifest_name(exclude)
    found = []
    for name in [n for n in names if n != skip][:MAX_MANIFESTS]:
        try:
            manifest = load_manifest(relay_dir, name[2:-5])
            st = os.lstat(manifest.socket)
        except (RelayError, OSError):
            continue  # malformed, foreign or without a socket: stale, never trusted
        if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
            found.append(manifest)
    return found


async def _probe(
    manifest: Manifest, sender: str, max_bytes: int, io_timeout: float, out: list[Peer]
) -> None:
    with trio.move_on_after(io_timeout):
        try:
            ack = await client.ping(
                Path(manifest.socket),
                target_instance_id=manifest.instance_id,
                sender_instance_id=sender,
                max_bytes=max_bytes,
            )
        except (RelayError, OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            return  # a stale socket, a reused pid's other listener, garbage: not a peer
        out.append(Peer(manifest=manifest, state=ack.state or manifest.state))


async def discover(
    relay_dir: Path, *, exclude_instance_id: str | None, io_timeout: float, max_bytes: int = 65536
) -> list[Peer]:
    """The live peers in ``relay_dir`` other than ``exclude_instance_id``, sorted by project
    (case-insensitive), then pid. Each candidate is pinged concurrently; one that does not
    answer ``pong`` within ``io_timeout`` is left out. A missing directory has no peers."""
    # A bounded handful of small files on a local (usually tmpfs) directory: read inline.
    manifests = _candidates(relay_dir, exclude_instance_id)
    sender = exclude_instance_id or f"{os.getpid()}-list"
    peers: list[Peer] = []
    async with trio.open_nursery() as nursery:
        for manifest in manifests:
            nursery.start_soon(_probe, manifest, sender, max_bytes, io_timeout, peers)
    peers.sort(
        key=lambda p: (p.manifest.project.casefold(), p.manifest.pid, p.manifest.instance_id)
    )
    return peers
