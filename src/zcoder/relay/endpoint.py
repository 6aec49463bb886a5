"""This instance's endpoint in the relay directory: the socket it serves and the manifest it
publishes, each remembered as it was made so that the health watch can heal them.

A tmp cleaner (systemd-tmpfiles, a cron job) or a person may delete files under the
temporary directory; an instance whose socket file is gone cannot be reached, though its
listener still runs. ``Endpoint`` notes the socket file it bound (device and inode, one
``lstat`` right after ``bind``) and the manifest it last published (device, inode, size,
modification time). Every scan interval the service's heal (``RelayHealth.watch``) asks:

* ``socket_state``: ``ours`` (the same file: a socket of ours with the noted device and
  inode), ``gone`` (nothing at the path), or what else is there (a regular file, a symbolic
  link, another socket...);
* ``rebind`` when it is gone: bind a new listening socket at the same path and serve it with
  the same ``Listener``. The old socket (no longer reachable by its path) still serves the
  connections it already accepted for ``grace`` seconds, then closes;
* ``manifest_current``: the manifest is the one last published, unchanged. When it is not
  (deleted, rewritten or replaced), the service publishes it again, and only after the
  socket is known to be ours: a manifest whose socket is gone is never published.

Anything else at the socket path was not made by this instance: it is never unlinked, now or
on shut-down (``unlink_socket`` removes only the noted file), and the relay fails saying so.

``serve`` runs every socket's ``Listener.serve`` in one shielded scope that only ``stop``
ends, so that on shut-down the manifest goes before the listener stops.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import attrs
import trio

from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay.listener import Listener, open_unix_listener

__all__ = ["Endpoint", "FileId", "file_id"]

_log = logging.getLogger(__name__)


@attrs.frozen
class FileId:
    """What one ``lstat`` tells of a file: which file it is, and whether it changed."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    uid: int

    def same_file(self, other: FileId | None) -> bool:
        return other is not None and (self.dev, self.ino) == (other.dev, other.ino)


def file_id(path: Path) -> FileId | None:
    """The file at ``path`` (not followed), or ``None`` when there is none."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return FileId(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid)


def _kind(found: FileId) -> str:
    mode = found.mode
    if stat.S_ISLNK(mode):
        kind = "a symbolic link"
    elif stat.S_ISREG(mode):
        kind = "a regular file"
    elif stat.S_ISDIR(mode):
        kind = "a directory"
    elif stat.S_ISSOCK(mode):
        kind = "another socket"
    else:
        kind = "another kind of file"
    return kind if found.uid == os.geteuid() else f"{kind} of uid {found.uid}"


class Endpoint:
    """The socket and the manifest of one running instance (see the module docstring)."""

    def __init__(self, socket_path: Path, manifest_path: Path, *, grace: float) -> None:
        self.socket_path = socket_path
        self.manifest_path = manifest_path
        self._grace = grace  # how long a replaced socket still serves what it accepted
        self._socket = file_id(socket_path)  # called right after the first bind
        self._manifest: FileId | None = None
        self._listener: Listener | None = None
        self._nursery: trio.Nursery | None = None
        self._current = trio.CancelScope()  # the newest socket's serving
        self._scope = trio.CancelScope(shield=True)
        self.rebinds = 0

    # -- looks ----------------------------------------------------------------------------

    def socket_state(self) -> str:
        """``ours``, ``gone``, or what else is at the socket path (one ``lstat``)."""
        try:
            found = file_id(self.socket_path)
        except OSError as exc:
            return f"a file that cannot be looked at ({exc.strerror})"
        if found is None:
            return "gone"
        if found.same_file(self._socket) and stat.S_ISSOCK(found.mode):
            return "ours"
        return _kind(found)

    def note_manifest(self) -> None:
        """Remember the manifest just published (what ``manifest_current`` compares)."""
        try:
            self._manifest = file_id(self.manifest_path)
        except OSError:  # looked at again by the next watch, which then fails the relay
            self._manifest = None

    def manifest_current(self) -> bool:
        """The manifest is the file last published, unchanged (one ``lstat``)."""
        try:
            return self._manifest is not None and file_id(self.manifest_path) == self._manifest
        except OSError:
            return False

    # -- serving --------------------------------------------------------------------------

    async def serve(
        self,
        listener: Listener,
        first: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve ``first`` and every socket ``rebind`` binds, with ``listener``, until
        ``stop``; ``started()`` once ``first`` accepts."""
        self._listener = listener
        with self._scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._serve_one, first)
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        self._nursery = None

    async def _serve_one(
        self,
        trio_listener: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]],
    ) -> None:
        assert self._listener is not None
        scope = self._current = trio.CancelScope()
        try:
            with scope:
                await self._listener.serve([trio_listener], task_status=task_status)
        finally:
            with trio.move_on_after(self._grace, shield=True):
                await trio_listener.aclose()

    async def rebind(self) -> None:
        """Bind a new listening socket at the socket path, which must be free, and serve it;
        the previous one serves what it accepted for ``grace`` more. ``RelayUnavailable``
        when it cannot (nothing is unlinked but a socket this call created)."""
        if self._nursery is None:
            raise RelayUnavailable("the relay is not serving")
        try:
            trio_listener = await open_unix_listener(self.socket_path)
        except RelayError as exc:
            raise RelayUnavailable(f"cannot bind the removed socket again: {exc}") from None
        self._socket = file_id(self.socket_path)  # before any wait: cleanup unlinks it
        previous = self._current
        await self._nursery.start(self._serve_one, trio_listener)
        previous.deadline = min(previous.deadline, trio.current_time() + self._grace)
        self.rebinds += 1

    def stop(self) -> None:
        """End every socket's serving (the sockets close; ``unlink_socket`` removes ours)."""
        self._scope.cancel()

    def unlink_socket(self) -> None:
        """Unlink the socket path only if it is still the socket this instance bound last;
        anything else there is left in place. Idempotent, never raises."""
        try:
            found = file_id(self.socket_path)
        except OSError as exc:
            _log.warning("relay cleanup: %s: %s", self.socket_path, exc.strerror)
            return
        if found is None:
            return
        if not (found.same_file(self._socket) and stat.S_ISSOCK(found.mode)):
            _log.warning("relay cleanup: %s is not our socket; left in place", self.socket_path)
            return
        try:
            self.socket_path.unlink(missing_ok=True)
        except OSError as exc:
            _log.warning("relay cleanup: cannot unlink %s: %s", self.socket_path, exc.strerror)
