"""The process-private spool of accepted relay messages: ``inbox -> processing -> done``.

Layout under ``<runtime>/relay`` (every directory 0700, every file 0600)::

    inbox/<sequence:012d>-<message-id>.json   accepted, waiting to be claimed
    processing/<same name>                    claimed by the foreground, turn running
    done/<message-id>.done                    empty receipt, kept for the process lifetime
    quarantine/<name>                         spool entries that failed to parse again
    sequence                                  the last sequence number given out
    state                                     "accepting" or "paused"

A spool file is one line of JSON metadata (``{"spool":1,"verified":true}``) followed by the
enqueue envelope's wire JSON, byte for byte. Every file is written to a temporary name in
the root and renamed into place, so a reader never sees half a message. A claim is a
``rename`` from ``inbox/`` to ``processing/``: of two claimers exactly one succeeds.

The listener (``enqueue``) and the foreground (``claim``/``complete``) run in the same thread,
so the in-process wake-up is a plain ``trio.Event``; the directories make claiming safe even
across threads or processes.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from zcoder.errors import RelayError
from zcoder.relay.envelope import Enqueue, Limits, Rejected, enqueue_from_json, enqueue_to_json
from zcoder.relay.protocol import MESSAGE_ID_RE

__all__ = ["Claimed", "Spool"]

_NAME_RE = re.compile(r"([0-9]{12})-(" + MESSAGE_ID_RE.pattern + r")\.json", re.ASCII)
_META_LIMIT = 64
_PAUSED, _ACCEPTING = "paused", "accepting"


@attrs.frozen
class Claimed:
    """One message taken from the inbox; ``path`` is its file in ``processing/``."""

    sequence: int
    envelope: Enqueue
    verified: bool
    path: Path


class _Invalid(Exception):
    """A spool entry that cannot be trusted; the message says why."""


class Spool:
    """The queue of one receiving instance. ``create`` before use, ``remove`` at the end."""

    def __init__(self, root: Path, *, max_queue: int, limits: Limits | None = None) -> None:
        self.root = root
        self._dirs = {name: root / name for name in ("inbox", "processing", "done", "quarantine")}
        self._max_queue = max_queue
        self._limits = Limits() if limits is None else limits
        self._paused = _read_text(root / "state") == _PAUSED
        self._last = self._recover_sequence()
        self._work = trio.Event()
        self._problems: list[str] = []
        self._callbacks: list[Callable[[], None]] = []

    # -- set-up and tear-down -------------------------------------------------------------

    def create(self) -> None:
        """Create the directories (mode 0700) and the state files; idempotent."""
        for path in (self.root, *self._dirs.values()):
            path.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                raise RelayError(f"spool directory {str(path)!r} is not our own directory")
            os.chmod(path, 0o700)
        self._write_atomic(self.root / "sequence", b"%d\n" % self._last)
        self._write_state()

    def remove(self) -> None:
        """Delete the spool if it is still our own directory; idempotent, never follows links."""
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(self.root, ignore_errors=True)

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after the depth or the paused state changes (same thread)."""
        self._callbacks.append(callback)

    # -- the listener's side --------------------------------------------------------------

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]:
        """Store one envelope; return the ack status and, when accepted, its 1-based place
        among the unfinished messages (the one being processed counts).

        Decides in this order: ``duplicate`` (the id is in inbox, processing or done, so a
        retry is idempotent even while paused or full), ``paused``, ``full``, ``accepted``.
        Raises ``RelayError`` if the message could not be stored.
        """
        mid = envelope.message_id
        if not MESSAGE_ID_RE.fullmatch(mid):
            return "invalid", None
        if self._known(mid):
            return "duplicate", None
        if self._paused:
            return "paused", None
        if self.depth() >= self._max_queue:
            return "full", None
        meta = json.dumps({"spool": 1, "verified": verified}, separators=(",", ":"))
        try:
            sequence = self._next_sequence()
            data = meta.encode() + b"\n" + enqueue_to_json(envelope)
            self._write_atomic(self._dirs["inbox"] / f"{sequence:012d}-{mid}.json", data)
        except OSError as exc:
            raise RelayError(f"cannot store the message in the spool: {exc.strerror}") from None
        self._work.set()
        self._work = trio.Event()
        self._changed()
        return "accepted", self.depth()

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        """Persist the state; paused rejects new envelopes and keeps the accepted ones."""
        if paused == self._paused:
            return
        self._paused = paused
        self._write_state()
        self._changed()

    # -- the foreground's side ------------------------------------------------------------

    def depth(self) -> int:
        """Accepted, unfinished messages: the entries of ``inbox/`` plus ``processing/``."""
        return len(_listdir(self._dirs["inbox"])) + len(_listdir(self._dirs["processing"]))

    def claim(self) -> Claimed | None:
        """Move the oldest inbox entry to ``processing/`` and parse it again.

        Entries that fail are quarantined and reported by ``take_problems``. Returns
        ``None`` when the inbox is empty (or another claimer took everything).
        """
        for name in sorted(_listdir(self._dirs["inbox"])):
            found = _NAME_RE.fullmatch(name)
            source = self._dirs["inbox"] / name
            if found is None:
                self._quarantine(source, "its name is not <sequence>-<message-id>.json")
                continue
            target = self._dirs["processing"] / name
            try:
                os.rename(source, target)
            except FileNotFoundError:
                continue  # another claimer won this one
            try:
                envelope, verified = self._read(target, found.group(2))
            except _Invalid as exc:
                self._quarantine(target, str(exc))
                continue
            self._changed()
            return Claimed(int(found.group(1)), envelope, verified, target)
        return None

    def complete(self, claimed: Claimed) -> None:
        """Leave an empty receipt in ``done/`` (first), then drop the payload. A spool that
        is already gone (the relay shut down meanwhile) is not an error."""
        if claimed.path.parent != self._dirs["processing"]:
            raise ValueError(f"{claimed.path} is not in this spool's processing directory")
        receipt = self._dirs["done"] / f"{claimed.envelope.message_id}.done"
        try:
            os.close(os.open(receipt, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        except FileNotFoundError:
            return
        claimed.path.unlink(missing_ok=True)
        self._changed()

    async def wait_for_work(self) -> None:
        """Return once ``depth() > 0`` (at once if it already is); woken by ``enqueue``."""
        while self.depth() == 0:
            await self._work.wait()

    def take_problems(self) -> list[str]:
        """The quarantine reports since the last call (for the transcript)."""
        problems, self._problems = self._problems, []
        return problems

    # -- internals ------------------------------------------------------------------------

    def _known(self, mid: str) -> bool:
        # Scan in the direction entries move (inbox -> processing -> done; the receipt is
        # written before the payload goes), so a concurrent move cannot hide an id.
        suffix = f"-{mid}.json"
        for key in ("inbox", "processing"):
            names = _listdir(self._dirs[key])
            if any(len(n) == 12 + len(suffix) and n.endswith(suffix) for n in names):
                return True
        return os.path.lexists(self._dirs["done"] / f"{mid}.done")

    def _next_sequence(self) -> int:
        sequence = self._last + 1
        self._write_atomic(self.root / "sequence", b"%d\n" % sequence)
        self._last = sequence
        return sequence

    def _recover_sequence(self) -> int:
        text = _read_text(self.root / "sequence")
        last = int(text) if text.isdigit() else 0
        for key in ("inbox", "processing"):
            for name in _listdir(self._dirs[key]):
                found = _NAME_RE.fullmatch(name)
                if found:
                    last = max(last, int(found.group(1)))
        return last

    def _write_state(self) -> None:
        self._write_atomic(self.root / "state", (_PAUSED if self._paused else _ACCEPTING).encode())

    def _write_atomic(self, path: Path, data: bytes) -> None:
        temp = self.root / f".tmp-{secrets.token_hex(8)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.rename(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def _read(self, path: Path, mid: str) -> tuple[Enqueue, bool]:
        limit = _META_LIMIT + self._limits.max_bytes + 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise _Invalid(f"cannot open it: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _Invalid("it is not a regular file")
            data = f.read(limit + 1)
        if len(data) > limit:
            raise _Invalid("it is larger than any message the listener accepts")
        head, sep, payload = data.partition(b"\n")
        try:
            meta = json.loads(head) if sep else None
        except ValueError:
            meta = None
        if type(meta) is not dict or meta.keys() != {"spool", "verified"} or meta["spool"] != 1:
            raise _Invalid("its metadata line is missing or malformed")
        if type(meta["verified"]) is not bool:
            raise _Invalid("its verified flag is not a boolean")
        try:
            envelope = enqueue_from_json(payload, limits=self._limits)
        except Rejected as exc:
            raise _Invalid(f"its envelope is invalid: {exc.reason}") from None
        if envelope.message_id != mid:
            raise _Invalid("its message id differs from its file name")
        return envelope, meta["verified"]

    def _quarantine(self, path: Path, reason: str) -> None:
        try:
            os.rename(path, self._dirs["quarantine"] / path.name)
        except FileNotFoundError:
            return  # another claimer dealt with it
        except OSError:  # the quarantine is unusable: do not leave the entry in the queue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        self._problems.append(f"relay spool entry {path.name!r} was quarantined: {reason}")
        self._changed()

    def _changed(self) -> None:
        for callback in self._callbacks:
            callback()


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(64).strip()
    except (FileNotFoundError, NotADirectoryError):
        return ""
