"""The relay service of one interactive instance: start, serve, fail soft, shut down.

Start-up, in the spec's order: settings (``ZCODER_RELAY``, ``Config.relay_problem``) and
socket support; the shared relay directory (validated or created 0700); the private spool
(0700); the instance names; the listener, bound and accepting; then the manifest, published
atomically; only then is the relay ``available`` (and ``started()`` is called).

Shut-down, in the spec's order: the instance is marked unavailable and its manifest removed;
the listener is stopped; the exact socket path is unlinked; the spool is removed. Cleanup is
idempotent, checks names, types and owners before unlinking, and never removes the shared
directory.

Nothing here takes the app down. When the relay cannot start, ``status()`` says
unavailable with one reason and ``run`` keeps sleeping until it is cancelled. Every failure
after the start, and every spool fault, goes through ``health`` (``relay/health.py``:
``fail``, ``spool_fault``, ``check_dir``, the periodic watch, ``take_problems``). The watch
also calls ``_heal``: a socket file deleted under us is bound again and a manifest deleted
or changed is published again (``relay/endpoint.py``, which serves every socket bound and
unlinks only its own); a manifest is never published while its socket is missing. A failure
withdraws the manifest and stops the listener here, but the spool stays until the service
ends, so that messages already accepted still run.

Every change (availability, pause state, depth, a fault) is noted in ``changes``, the one
``Changes`` shared with the spool; the app awaits it. Nothing here calls out to the app:
receipts and cancels (zcoder's extension) are answered by ``intake``
(``relay/extension.py``), in the relay package, and taken in as news.

Longer than 400 lines on purpose: the spec's start-up and shut-down orders are one
sequence each, and split across modules they could no longer be checked step by step.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import trio

from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay import client, discovery, registry
from zcoder.relay.changes import Changes
from zcoder.relay.endpoint import Endpoint
from zcoder.relay.envelope import Cancel, Enqueue, Limits, Receipt
from zcoder.relay.extension import ExtensionIntake
from zcoder.relay.health import RelayHealth
from zcoder.relay.limits import PROTOCOL_VERSION
from zcoder.relay.listener import Listener, open_unix_listener
from zcoder.relay.paths import (
    Reservation,
    ensure_relay_dir,
    reserve_instance,
    select_relay_dir,
)
from zcoder.relay.registry import Manifest, Peer, publish_manifest, remove_manifest
from zcoder.relay.settings import RelaySettings
from zcoder.relay.spool.store import Spool, SpoolFault

__all__ = ["RelayService", "RelayStatus"]

_log = logging.getLogger(__name__)
_REFRESHABLE = frozenset({"model", "session_id", "profile", "state"})
_CLOSE_GRACE = 1.0
SCAN_INTERVAL = 2.0  # seconds between looks at the relay directory and the spool


@attrs.frozen
class RelayStatus:
    """What the status bar and ``/agents`` show. ``reason`` is empty while available."""

    available: bool
    reason: str
    instance_id: str
    paused: bool
    queued: int


class RelayService:
    """Owns the listener, the manifest, the socket and the spool of this instance."""

    def __init__(
        self,
        *,
        settings: RelaySettings,
        settings_problem: str,
        runtime_dir: Path | None,
        env: Mapping[str, str],
        project: str,
        workspace: Path,
        profile: str,
        model: str,
        session_id: str,
        extension: bool = False,
        scan_interval: float | None = None,
    ) -> None:
        self._settings = settings
        self._settings_problem = settings_problem
        self._runtime_dir = runtime_dir
        self._env = dict(env)
        self._fields = {"model": model, "session_id": session_id, "profile": profile}
        self._identity = (project, str(workspace))
        self._activity = "ready"  # ready or busy; the manifest says paused while paused
        self._model_state: str | None = None  # what a pong says of the model, once known
        self._want_paused = settings.mode == "paused"
        self._available = False
        self._reservation: Reservation | None = None
        self._endpoint: Endpoint | None = None  # the socket and manifest, once bound
        self._spool: Spool | None = None
        self._published = False
        self._started_at = 0
        self._sent = 0
        self._limits = Limits(
            max_bytes=settings.max_bytes, max_message_chars=settings.max_message_chars
        )
        self._stop = trio.Event()
        self.changes = Changes()  # shared with the spool: one wait for every change
        self.health = RelayHealth(
            changes=self.changes,
            spool=lambda: self._spool,
            on_fail=self._stop_serving,
            scan_interval=SCAN_INTERVAL if scan_interval is None else scan_interval,
        )
        # zcoder's extension (``extension``: the app sends receipts): receipts and cancels,
        # answered here and taken in as news; without it they are ``unsupported``.
        self.intake = ExtensionIntake(spool=lambda: self.spool, changes=self.changes)
        self._extension = extension

    # -- queries --------------------------------------------------------------------------

    def status(self) -> RelayStatus:
        spool = self._spool
        return RelayStatus(
            available=self._available,
            reason="" if self._available else self.health.reason,
            instance_id=self._reservation.instance_id if self._reservation else "",
            paused=spool.paused if spool is not None else self._want_paused,
            queued=_unfinished(spool, damaged=self.health.damaged),
        )

    def new_envelope(
        self, target_instance_id: str, body: str, hops: int = 0, *, after: int = 0
    ) -> Enqueue:
        """An ``enqueue`` from this instance with a fresh message id (``<id>-<counter>``,
        the counter past both the last one sent and ``after``: the sent list's last
        number, so a message's number is its counter), ``hops`` relayed turns deep
        (zcoder's extension: always sent, a version-1 peer ignores it);
        ``RelayUnavailable`` while the relay is not available, ``ValueError`` for a field
        the envelope refuses (empty body, bad target id)."""
        if not self._available or self._reservation is None:
            raise RelayUnavailable(self.health.reason)
        self._sent = max(self._sent, after) + 1
        project, workspace = self._identity
        instance_id = self._reservation.instance_id
        return Enqueue(
            protocol=PROTOCOL_VERSION,
            type="enqueue",
            message_id=client.new_message_id(instance_id, self._sent),
            target_instance_id=target_instance_id,
            sender_instance_id=instance_id,
            sender_pid=os.getpid(),
            sender_project=project,
            sender_workspace=workspace,
            body=body,
            created_at=int(time.time()),
            hops=hops,
        )

    def refused(self, envelope: Enqueue) -> None:
        """The receiver answered ``envelope`` without storing it: its counter goes to the
        next message (no receiver holds the id, so it cannot be taken for a repeat)."""
        if client.message_counter(envelope.message_id) == self._sent:
            self._sent -= 1

    @property
    def spool(self) -> Spool | None:
        """The spool to claim from while it exists and is not damaged, else ``None``."""
        return None if self.health.damaged else self._spool

    async def discover(self) -> list[Peer]:
        """The live peers, excluding this instance, while the relay directory is still safe
        (``health.check_dir``); ``RelayUnavailable`` otherwise (the reason), ``RelayError``
        if the directory cannot be read."""
        relay_dir = self.health.check_dir()
        return await discovery.discover(
            relay_dir,
            exclude_instance_id=self._reservation.instance_id if self._reservation else None,
            io_timeout=self._settings.io_timeout,
            max_bytes=self._settings.max_bytes,
        )

    @property
    def instance_id(self) -> str:
        """This instance's id once reserved, else ``""``."""
        return self._reservation.instance_id if self._reservation else ""

    # -- control --------------------------------------------------------------------------

    def refresh(self, **fields: str) -> None:
        """Update ``model``, ``session_id``, ``profile`` or ``state`` (ready/busy) and
        republish the manifest; a failure to republish makes the relay unavailable."""
        unknown = set(fields) - _REFRESHABLE
        if unknown:
            raise ValueError(f"cannot refresh manifest fields {sorted(unknown)}")
        if "state" in fields:
            state = fields.pop("state")
            if state not in ("ready", "busy"):
                raise ValueError(f"state must be ready or busy, not {state!r}")
            self._activity = state
        self._fields.update(fields)
        self._republish()

    def set_model_available(self, available: bool) -> None:
        """What a ``pong`` says from now on of this instance's model server (zcoder's
        extension: ``model_state``, ``available`` or ``unavailable``)."""
        self._model_state = "available" if available else "unavailable"

    def pause(self) -> None:
        self._set_paused(True)

    def resume(self) -> None:
        self._set_paused(False)

    # -- the service ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start, call ``started()`` once available or known unavailable, serve until
        cancelled. Never raises but ``trio.Cancelled``."""
        started = False

        def signal_started() -> None:
            nonlocal started
            started = True
            task_status.started()

        try:
            reason = self._startup_problem()
            if not reason:
                reason = await self._serve(signal_started)
            if started:
                self.health.fail(reason)  # a no-op when fail() ended it
            else:  # nothing was ever accepted: no spool to keep
                self._remove_spool()
                self._go_unavailable(reason)
                task_status.started()
            await trio.sleep_forever()
        finally:
            self._remove_spool()

    def _startup_problem(self) -> str:
        if self._settings_problem:
            return self._settings_problem
        if self._settings.mode == "off":
            return "the relay is off (ZCODER_RELAY=off)"
        if self._runtime_dir is None:
            return "no private runtime directory"
        if not hasattr(socket, "AF_UNIX"):
            return "this system has no Unix-domain socket support"
        return ""

    async def _serve(self, signal_started: Callable[[], None]) -> str:
        """Run the relay; return the reason it ended (Cancelled propagates)."""
        try:
            self._prepare()
            assert self._reservation is not None and self._spool is not None
            trio_listener = await open_unix_listener(self._reservation.socket_path)
            self._endpoint = Endpoint(
                self._reservation.socket_path,
                self._reservation.manifest_path,
                grace=self._settings.io_timeout,
            )
            try:
                await self._serve_listener(trio_listener, signal_started)
            finally:
                with trio.move_on_after(_CLOSE_GRACE, shield=True):
                    await trio_listener.aclose()
        except (RelayError, OSError) as exc:
            return _reason(exc)
        except Exception as exc:  # a crash inside the listener: the relay goes, the app stays
            _log.exception("relay service failed")
            return f"the relay failed: {_reason(exc)}"
        finally:
            self._cleanup()
        return self.health.reason

    def _prepare(self) -> None:
        relay_dir = ensure_relay_dir(select_relay_dir(self._settings, self._env))
        self.health.relay_dir = relay_dir
        assert self._runtime_dir is not None  # checked by _startup_problem
        root = self._runtime_dir / "relay"
        spool = Spool(
            root, max_queue=self._settings.max_queue, limits=self._limits, changes=self.changes
        )
        self._spool = spool
        spool.create()
        spool.set_paused(self._want_paused)
        spool.on_fault(self.health.spool_fault)
        self._reservation = reserve_instance(relay_dir)

    async def _serve_listener(
        self, trio_listener: trio.SocketListener, signal_started: Callable[[], None]
    ) -> None:
        assert self._reservation is not None and self._spool is not None
        relay_dir = self._reservation.manifest_path.parent
        listener = Listener(
            instance_id=self._reservation.instance_id,
            spool=self._spool,
            sender_check=functools.partial(self._sender_check, relay_dir),
            state=self._state,
            limits=self._limits,
            io_timeout=self._settings.io_timeout,
            extension=self.intake.handle if self._extension else None,
            model_state=lambda: self._model_state,
        )
        endpoint = self._endpoint
        assert endpoint is not None
        async with trio.open_nursery() as nursery:
            # Shielded, so that on shut-down the manifest goes before the listener stops.
            await nursery.start(endpoint.serve, listener, trio_listener)
            try:
                self._publish()
                if not self.health.problem:
                    self._available, self.health.reason = True, ""
                    self._changed()
                signal_started()
                nursery.start_soon(self.health.watch, self._heal)
                await self._stop.wait()
            finally:
                self._withdraw()
                endpoint.stop()
                nursery.cancel_scope.cancel()  # the watcher

    async def _heal(self) -> None:
        """One look at our socket and manifest (``health.watch``, every scan interval): a
        socket that is gone is bound again, then a manifest that is gone or changed is
        published again. ``RelayError`` when something else stands at the socket path
        (never unlinked) or it cannot be bound; the watch then fails the relay."""
        endpoint = self._endpoint
        if endpoint is None or not self._available:
            return
        state = endpoint.socket_state()
        if state == "gone":
            _log.warning("relay socket %s was removed; binding it again", endpoint.socket_path)
            await endpoint.rebind()
        elif state != "ours":
            raise RelayError(
                f"socket {str(endpoint.socket_path)!r} was replaced by {state}, "
                "not made by this instance; left in place"
            )
        if state == "gone" or not endpoint.manifest_current():
            self._republish()

    def _sender_check(self, relay_dir: Path, envelope: Enqueue | Receipt | Cancel) -> bool:
        # The check reads the sender's manifest from the relay directory: only while safe.
        try:
            self.health.check_dir()
        except RelayUnavailable:
            return False
        return registry.sender_is_registered(relay_dir, envelope)

    # -- manifest -------------------------------------------------------------------------

    def _state(self) -> str:
        paused = self._spool.paused if self._spool is not None else self._want_paused
        return "paused" if paused else self._activity

    def _manifest(self) -> Manifest:
        assert self._reservation is not None
        project, workspace = self._identity
        return Manifest(
            protocol=PROTOCOL_VERSION,
            instance_id=self._reservation.instance_id,
            pid=os.getpid(),
            project=project,
            workspace=workspace,
            session_id=self._fields["session_id"],
            profile=self._fields["profile"],
            model=self._fields["model"],
            socket=os.fspath(self._reservation.socket_path),
            state=self._state(),
            started_at=self._started_at,
        )

    def _publish(self) -> None:
        assert self._reservation is not None
        self._started_at = int(time.time())
        publish_manifest(self._reservation.manifest_path, self._manifest())
        self._published = True
        if self._endpoint is not None:
            self._endpoint.note_manifest()

    def _republish(self) -> None:
        """Publish again, only while our socket is in place (else the watch heals it
        first: a manifest whose socket is gone is never published)."""
        if not (self._available and self._published and self._reservation is not None):
            return
        if self._endpoint is None or self._endpoint.socket_state() != "ours":
            return
        try:
            publish_manifest(self._reservation.manifest_path, self._manifest())
        except RelayError as exc:
            self.health.fail(str(exc))
            return
        self._endpoint.note_manifest()

    def _set_paused(self, paused: bool) -> None:
        """Never raises: a ``state`` file that cannot be written is a fault to show (the
        switch holds in memory), or damage that makes the relay fail."""
        self._want_paused = paused
        if self._spool is not None:
            try:
                self._spool.set_paused(paused)
            except SpoolFault as fault:
                self.health.spool_fault(fault)
        self._republish()
        self._changed()

    # -- shut-down ------------------------------------------------------------------------

    def _stop_serving(self) -> None:
        """What a failure does here (``health.fail``): withdraw at once, end the serving."""
        self._withdraw()
        self._stop.set()

    def _withdraw(self) -> None:
        """Step 1: unavailable, manifest removed. Never raises."""
        was_available, self._available = self._available, False
        self._published = False
        if self._reservation is not None:
            try:
                remove_manifest(self._reservation.manifest_path)
            except RelayError as exc:
                _log.warning("relay cleanup: %s", exc)
        if was_available:
            self._changed()

    def _cleanup(self) -> None:
        """Steps 1 and 3 (the listener is stopped by then); idempotent, never raises. The
        spool (step 4) goes when ``run`` ends: accepted messages may still run meanwhile."""
        self._withdraw()
        if self._endpoint is not None:
            self._endpoint.unlink_socket()  # only the socket we bound, nothing else

    def _remove_spool(self) -> None:
        if self._spool is not None:
            self._spool.remove()
            self._spool = None
            self._changed()

    def _go_unavailable(self, reason: str) -> None:
        self._available = False
        self.health.reason = reason
        self._changed()

    def _changed(self) -> None:
        self.changes.note()


def _unfinished(spool: Spool | None, *, damaged: bool) -> int:
    """What ``queued`` counts: the accepted messages that are still to run or running; of a
    damaged spool only the one running (nothing more is claimed from it)."""
    if spool is None:
        return 0
    return spool.depth() - spool.waiting() if damaged else spool.depth()


def _reason(exc: BaseException) -> str:
    """One line for a failure; the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}{f': {exc.filename}' if exc.filename else ''}"
    return str(exc) or type(exc).__name__
