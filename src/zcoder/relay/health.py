"""The relay's health once it runs: why it is unavailable, its failure, its faults, the watch.

Every failure after the start goes through ``fail(reason)``, once (the first reason wins,
``problem``): the listener crashed, a manifest refresh could not be written, the relay
directory is no longer safe (``check_dir``: every discovery, send, received enqueue and
every ``scan_interval``, in ``watch``), the instance's socket path holds something it did
not make or its socket cannot be bound again (the watch's ``heal``, the service's: see
``endpoint.py``; a deleted socket or manifest is healed, not a failure), or the spool is
damaged (``SpoolFault`` with ``damaged``). The owner's ``on_fail`` then makes the relay
unavailable for good: the manifest is withdrawn, the listener stops and the socket goes, but
the spool stays until the service ends, so that messages already accepted still run. A
storage fault that is not damage (a full or read-only disk) leaves the relay running and
becomes one line for the user. The lines to show are drained by ``take_problems``.

``RelayService`` owns one ``RelayHealth`` (``service.health``) and tells it what to watch
(``relay_dir`` once found safe, the spool through a getter); every change is noted in the
relay's one ``Changes``. Nothing here calls out to the app.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from zcoder.errors import RelayError, RelayUnavailable
from zcoder.relay.changes import Changes
from zcoder.relay.paths import relay_dir_problem
from zcoder.relay.spool.store import Spool, SpoolFault

__all__ = ["RelayHealth"]

_log = logging.getLogger(__name__)


class RelayHealth:
    """The failure, the fault lines and the periodic watch of one relay service."""

    def __init__(
        self,
        *,
        changes: Changes,
        spool: Callable[[], Spool | None],
        on_fail: Callable[[], None],
        scan_interval: float,
    ) -> None:
        self._changes = changes
        self._spool = spool  # the service's spool while it exists (damaged or not)
        self._on_fail = on_fail  # withdraw and stop; must not raise
        self._scan_interval = scan_interval
        # Why the relay is unavailable ("" while available): set by the service on its
        # start and stop, and by ``fail``.
        self.reason = "the relay has not started"
        self.relay_dir: Path | None = None  # the canonical shared directory once found safe
        self._problem = ""  # why the relay failed after it started; set once
        self._damaged = False  # no more claims: the spool cannot be trusted
        self._lines: list[str] = []  # storage faults to show, drained by take_problems

    @property
    def problem(self) -> str:
        """Why the relay failed after it had started (``fail``), or ``""``."""
        return self._problem

    @property
    def damaged(self) -> bool:
        """The spool was found damaged: nothing more is claimed from it."""
        return self._damaged

    def take_problems(self) -> list[str]:
        """The lines to show the user since the last call: quarantined spool entries and
        storage faults (the failure itself is ``problem``)."""
        lines, self._lines = self._lines, []
        spool = self._spool()
        if spool is not None:
            lines.extend(spool.take_problems())
        return lines

    def check_dir(self) -> Path:
        """The relay directory, if the relay has not failed and the directory is still our
        private one (one ``lstat``); else ``RelayUnavailable`` with the reason, and a
        directory found unsafe makes the relay fail."""
        if self._problem:
            raise RelayUnavailable(self._problem)
        if self.relay_dir is None:
            raise RelayUnavailable(self.reason)
        problem = relay_dir_problem(self.relay_dir)
        if problem:
            self.fail(problem)
            raise RelayUnavailable(problem)
        return self.relay_dir

    def fail(self, reason: str) -> None:
        """Make the relay unavailable for good with ``reason`` (see the module docstring);
        the first reason wins, later calls do nothing. Never raises."""
        if self._problem:
            return
        _log.warning("relay failed: %s", reason)
        self._problem = self.reason = reason
        self._on_fail()  # now, not when the service task next runs: no peer lists it again
        self._changes.note()

    def spool_fault(self, fault: SpoolFault) -> None:
        """Damage makes the relay fail and ends the claims; any other fault is one line
        for the user."""
        if fault.damaged:
            spool = self._spool()
            lost = spool.waiting() if spool is not None else 0
            self._damaged = True
            many = "s" if lost > 1 else ""
            self.fail(
                f"{fault}; {lost} accepted message{many} will not run" if lost else str(fault)
            )
        else:
            _log.warning("relay: %s", fault)
            self._lines.append(str(fault))
            self._changes.note()

    async def watch(self, heal: Callable[[], Awaitable[None]]) -> None:
        """Every ``scan_interval``: is the relay directory still safe, are this instance's
        socket and manifest still in place (``heal``, the service's: it binds the socket
        again or republishes the manifest, and raises ``RelayError`` when it cannot: the
        relay fails with that reason), does the spool hold anything foreign (quarantined
        and reported even while the queue is empty), is its layout intact. Ends when the
        relay fails; a storage fault is told once, not on every look."""
        last = ""
        while not self._problem:
            await trio.sleep(self._scan_interval)
            try:
                self.check_dir()
                await heal()
            except RelayError as exc:  # the directory (failed already), or the socket
                self.fail(str(exc))  # the first reason wins: a no-op after check_dir's
                return
            try:
                spool = self._spool()
                if spool is not None:
                    spool.scan()
                last = ""
            except SpoolFault as fault:
                if fault.damaged or str(fault) != last:
                    self.spool_fault(fault)
                last = str(fault)
