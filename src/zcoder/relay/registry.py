"""Discovery of the live peers in the shared relay directory, and the sender check.

Every file in the directory is untrusted. Discovery is read-only and bounded, and has two
drivers that share every step here: ``discovery.discover`` waits for the pongs in Trio
(``/list-agents``, the ``list_agents`` tool, sends), ``blocking.discover_blocking`` with
plain blocking waits under the same deadline (``zcoder agents``, which so loads no Trio).
This module imports no trio. The steps:

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
   accepts: one wake-up; ``candidates`` ends here), then wait for the answers
   concurrently, each under ``io_timeout`` (the driver). Only a ``pong`` for that exact
   instance id makes a peer (``found``);
7. sort by project (case-insensitive), then pid, then instance id (``sorted_peers``).

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

from zcoder.errors import RelayError
from zcoder.relay.envelope import Ack
from zcoder.relay.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    load_manifest,
    publish_manifest,
    remove_manifest,
)
from zcoder.relay.paths import manifest_name, socket_name
from zcoder.relay.ping import PendingPing, connect_nowait, start_ping
from zcoder.relay.protocol import INSTANCE_ID_RE
from zcoder.text.visible import escape_controls

__all__ = [
    "MAX_DIR_ENTRIES",
    "MAX_MANIFESTS",
    "MAX_MANIFEST_BYTES",
    "Candidate",
    "Manifest",
    "Peer",
    "candidates",
    "close_all",
    "dropped",
    "found",
    "list_sender",
    "load_manifest",
    "publish_manifest",
    "remove_manifest",
    "sender_is_registered",
    "sorted_peers",
]

MAX_DIR_ENTRIES = 4096  # directory entries looked at per discovery
MAX_MANIFESTS = 128  # candidates with a listening socket that are read and pinged
_MAX_LOG_CHARS = 300  # one debug line per dropped candidate
_MAX_NAME_CHARS = 80

_log = logging.getLogger(__name__)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dropped(name: str, why: str) -> None:
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
            dropped(name, "the name holds no valid instance id")
        elif f"{name[:-5]}.sock" not in names:
            dropped(name, "no socket of that name next to it")
        else:
            ids.append(name[2:-5])
    return ids


def _implausible(directory: str, instance_id: str, uid: int) -> str:
    """Step 3, ``lstat`` only: why the pair is not a manifest-sized regular file of ours
    next to a socket of ours; ``""`` when it is."""
    try:
        manifest = os.lstat(os.path.join(directory, manifest_name(instance_id)))
        sock = os.lstat(os.path.join(directory, socket_name(instance_id)))
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


Candidate = tuple[Manifest, PendingPing | None]


def candidates(directory: str, exclude: str | None, sender: str, max_bytes: int) -> list[Candidate]:
    """Steps 1 to 6 up to the wait for the pongs: valid manifests with a listening socket,
    in name order, at most ``MAX_MANIFESTS`` connections made, each with its ping written
    (``None``: the backlog was full, the probe connects again). The caller owns the
    sockets."""
    uid = os.geteuid()
    found: list[Candidate] = []
    connected = 0
    try:
        listed = _listed_ids(directory, exclude)
        for n, instance_id in enumerate(listed):
            name = manifest_name(instance_id)
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
                dropped(name, why)
                continue
            try:
                sock = connect_nowait(os.path.join(directory, socket_name(instance_id)))
            except OSError as exc:  # a socket file left behind by a dead instance
                dropped(name, f"nobody listens on its socket (stale): {exc.strerror}")
                continue
            connected += 1
            try:
                manifest = load_manifest(directory, instance_id)
            except RelayError as exc:
                if sock is not None:
                    sock.close()
                dropped(name, str(exc))  # malformed, foreign or inconsistent: never trusted
                continue
            if sock is None:
                found.append((manifest, None))
                continue
            try:
                ids = {"target_instance_id": instance_id, "sender_instance_id": sender}
                found.append((manifest, start_ping(sock, max_bytes=max_bytes, **ids)))
            except RelayError as exc:  # the peer hung up at once: not a peer
                dropped(name, str(exc))
    except BaseException:
        close_all(found)
        raise
    return found


def close_all(candidates: list[Candidate]) -> None:
    for _, pending in candidates:
        if pending is not None:
            pending.sock.close()


def list_sender(exclude_instance_id: str | None) -> str:
    """Who pings: this instance, or ``<pid>-list`` for a process that is none."""
    return exclude_instance_id or f"{os.getpid()}-list"


def found(manifest: Manifest, ack: Ack) -> Peer:
    """Step 6's peer: its manifest, and the state its pong reported."""
    return Peer(manifest=manifest, state=ack.state or manifest.state, model=ack.model_state or "")


def sorted_peers(peers: list[Peer]) -> list[Peer]:
    """Step 7: by project (case-insensitive), then pid, then instance id."""
    return sorted(
        peers, key=lambda p: (p.manifest.project.casefold(), p.manifest.pid, p.manifest.instance_id)
    )
