"""Discovery of the live peers in the shared relay directory, and the sender check.

Every file in the directory is untrusted. Discovery (``discover``, which serves ``zcoder
agents``, ``/list-agents`` and the ``list_agents`` tool alike) is read-only and bounded:

1. look at no more than ``MAX_DIR_ENTRIES`` directory entries (one ``scandir``);
2. keep the names ``a-<instance-id>.json`` (a valid id, not the caller's) whose
   ``a-<instance-id>.sock`` is among those entries, in sorted order;
3. cheap checks, ``lstat`` only, nothing opened: the manifest is a regular file of ours of
   1 to ``MAX_MANIFEST_BYTES`` bytes and the socket is a socket of ours;
4. connect to the socket without waiting; a refused connection is a stale entry (a socket
   file left by a dead listener). Only here does the bound apply: the first
   ``MAX_MANIFESTS`` candidates in name order whose socket accepts a connection go on
   (a full backlog counts as accepting; that probe connects again, waiting);
5. read and validate the manifest (``manifest.py``);
6. write a ping on each valid one's connection at once (the peer finds it as soon as it
   accepts: one wake-up), then wait for the answers concurrently, each under
   ``io_timeout``. Only a ``pong`` for that exact instance id makes a peer;
7. sort by project (case-insensitive), then pid, then instance id.

So stale files of any number (up to the entry bound) cost a few system calls each and
never hide live peers; the 128 files read and pinged are ones whose socket is listening.
``kill -0`` and a manifest's contents are never proof of life, and discovery deletes
nothing: cleanup removes only an instance's own files.

Every candidate dropped on the way (a manifest name whose step failed) gets one line on this
module's logger at debug level saying which step and why, at most ``_MAX_LOG_CHARS``
characters, untrusted names escaped (``visible.escape_controls``) and shortened; the
caller's own manifest and names that are not manifests are not candidates.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from zcoder.errors import RelayError
from zcoder.relay import client, wire
from zcoder.relay.limits import DEFAULT_MAX_BYTES
from zcoder.relay.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    load_manifest,
    publish_manifest,
    remove_manifest,
)
from zcoder.relay.protocol import INSTANCE_ID_RE
from zcoder.text.visible import escape_controls

__all__ = [
    "MAX_DIR_ENTRIES",
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

MAX_DIR_ENTRIES = 4096  # directory entries looked at per discovery
MAX_MANIFESTS = 128  # candidates with a listening socket that are read and pinged
_MAX_LOG_CHARS = 300  # one debug line per dropped candidate
_MAX_NAME_CHARS = 80

_log = logging.getLogger(__name__)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dropped(name: str, why: str) -> None:
    """One bounded debug line: which candidate (an untrusted name) and why it is dropped."""
    if _log.isEnabledFor(logging.DEBUG):
        who = _shorten(escape_controls(name), _MAX_NAME_CHARS)
        line = f"relay discovery dropped {who}: {escape_controls(why)}"
        _log.debug("%s", _shorten(line, _MAX_LOG_CHARS))


@attrs.frozen
class Peer:
    """A live instance: its manifest and the state its listener reported to our ping."""

    manifest: Manifest
    state: str
    # zcoder's extension of the pong: "available", "unavailable", "" (not said: a version-1
    # peer, or a zcoder that has not reached its model server yet).
    model: str = ""

    @property
    def shown_state(self) -> str:
        """``ready``, or ``ready, model unavailable`` when the peer said its model server
        does not answer (a task sent now waits for it)."""
        return f"{self.state}, model unavailable" if self.model == "unavailable" else self.state


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:  # ProcessLookupError, or PermissionError: another user's process
        return False
    return True


class _Sender(Protocol):
    """What the sender check reads of a request: an enqueue, a receipt or a cancel."""

    @property
    def sender_instance_id(self) -> str: ...

    @property
    def sender_pid(self) -> int: ...


def sender_is_registered(relay_dir: Path, envelope: _Sender) -> bool:
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


def receiver_gone(relay_dir: Path) -> Callable[[str], bool]:
    """Whether the instance with that id has left ``relay_dir``: its manifest is missing
    or unusable, or its process is dead. A few system calls, no connection."""

    def gone(instance_id: str) -> bool:
        try:
            manifest = load_manifest(relay_dir, instance_id)
        except RelayError:
            return True
        return not _exists(manifest.pid)

    return gone


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: a process is there (not ours: not the receiver)
        return True
    return True


# -- discovery ------------------------------------------------------------------------------


def _listed_ids(directory: str, exclude: str | None) -> list[str]:
    """Steps 1 and 2: the ids with both names among the first ``MAX_DIR_ENTRIES`` entries."""
    names: set[str] = set()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                names.add(entry.name)
                if len(names) >= MAX_DIR_ENTRIES:
                    _log.debug("relay discovery looked at the first %d entries only", len(names))
                    break
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RelayError(f"cannot read relay directory {directory!r}: {exc.strerror}") from None
    ids = []
    for name in sorted(names):
        if not (name.startswith("a-") and name.endswith(".json")) or name[2:-5] == exclude:
            continue
        if not INSTANCE_ID_RE.fullmatch(name[2:-5]):
            _dropped(name, "the name holds no valid instance id")
        elif f"{name[:-5]}.sock" not in names:
            _dropped(name, "no socket of that name next to it")
        else:
            ids.append(name[2:-5])
    return ids


def _implausible(directory: str, instance_id: str, uid: int) -> str:
    """Step 3, ``lstat`` only: why the pair is not a manifest-sized regular file of ours
    next to a socket of ours; ``""`` when it is."""
    try:
        manifest = os.lstat(os.path.join(directory, f"a-{instance_id}.json"))
        sock = os.lstat(os.path.join(directory, f"a-{instance_id}.sock"))
    except OSError as exc:
        return f"cannot lstat it: {exc.strerror}"
    if not stat.S_ISREG(manifest.st_mode) or manifest.st_uid != uid:
        return "the manifest is not a regular file of ours"
    if manifest.st_size == 0:
        return "an empty manifest: a reserved name, not yet published"
    if manifest.st_size > MAX_MANIFEST_BYTES:
        return f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes"
    if not stat.S_ISSOCK(sock.st_mode) or sock.st_uid != uid:
        return "its socket is not a socket of ours"
    return ""


_Candidate = tuple[Manifest, "client.PendingPing | None"]


def _candidates(
    directory: str, exclude: str | None, sender: str, max_bytes: int
) -> list[_Candidate]:
    """Steps 1 to 6 up to the wait for the pongs: valid manifests with a listening socket,
    in name order, at most ``MAX_MANIFESTS`` connections made, each with its ping written
    (``None``: the backlog was full, the probe connects again). The caller owns the
    sockets."""
    uid = os.geteuid()
    found: list[_Candidate] = []
    connected = 0
    try:
        listed = _listed_ids(directory, exclude)
        for n, instance_id in enumerate(listed):
            name = f"a-{instance_id}.json"
            if connected >= MAX_MANIFESTS:
                _log.debug(
                    "relay discovery read %d listening candidates, its bound; %d more names "
                    "not examined",
                    MAX_MANIFESTS,
                    len(listed) - n,
                )
                break
            why = _implausible(directory, instance_id, uid)
            if why:
                _dropped(name, why)
                continue
            try:
                sock = wire.connect_nowait(os.path.join(directory, f"a-{instance_id}.sock"))
            except OSError as exc:  # a socket file left behind by a dead instance
                _dropped(name, f"nobody listens on its socket (stale): {exc.strerror}")
                continue
            connected += 1
            try:
                manifest = load_manifest(directory, instance_id)
            except RelayError as exc:
                if sock is not None:
                    sock.close()
                _dropped(name, str(exc))  # malformed, foreign or inconsistent: never trusted
                continue
            if sock is None:
                found.append((manifest, None))
                continue
            try:
                ids = {"target_instance_id": instance_id, "sender_instance_id": sender}
                found.append((manifest, client.start_ping(sock, max_bytes=max_bytes, **ids)))
            except RelayError as exc:  # the peer hung up at once: not a peer
                _dropped(name, str(exc))
    except BaseException:
        _close_all(found)
        raise
    return found


def _close_all(candidates: list[_Candidate]) -> None:
    for _, pending in candidates:
        if pending is not None:
            pending.sock.close()


async def _probe(
    candidate: _Candidate, sender: str, max_bytes: int, io_timeout: float, out: list[Peer]
) -> None:
    manifest, pending = candidate
    name = f"a-{manifest.instance_id}.json"
    with trio.move_on_after(io_timeout) as waiting:
        try:
            if pending is None:
                ack = await client.ping(
                    Path(manifest.socket),
                    target_instance_id=manifest.instance_id,
                    sender_instance_id=sender,
                    max_bytes=max_bytes,
                )
            else:
                ack = await client.finish_ping(pending, max_bytes=max_bytes)
        except (RelayError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            _dropped(name, str(exc))  # a reused pid's other listener, garbage: not a peer
            return
        state = ack.state or manifest.state
        out.append(Peer(manifest=manifest, state=state, model=ack.model_state or ""))
    if waiting.cancelled_caught:
        _dropped(name, f"no answer to the ping within {io_timeout:g} s")


async def discover(
    relay_dir: Path,
    *,
    exclude_instance_id: str | None,
    io_timeout: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Peer]:
    """The live peers in ``relay_dir`` other than ``exclude_instance_id``, found by the
    bounded steps of the module docstring and sorted by project (case-insensitive), then
    pid, then instance id. A missing directory has no peers; an unreadable one is a
    ``RelayError``. Read-only: stale files are skipped, never removed."""
    # A bounded number of cheap system calls on a local (usually tmpfs) directory: inline.
    sender = exclude_instance_id or f"{os.getpid()}-list"
    candidates = _candidates(os.fspath(relay_dir), exclude_instance_id, sender, max_bytes)
    peers: list[Peer] = []
    started = 0
    try:
        async with trio.open_nursery() as nursery:
            for candidate in candidates:
                nursery.start_soon(_probe, candidate, sender, max_bytes, io_timeout, peers)
                started += 1
    finally:
        _close_all(candidates[started:])  # each probe closes its own socket
    peers.sort(
        key=lambda p: (p.manifest.project.casefold(), p.manifest.pid, p.manifest.instance_id)
    )
    return peers
