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

The listener (``enqueue``) and the foreground (``claim``/``complete``) run in the same
thread, so the in-process wake-up is a plain ``trio.Event``. The spool has one writer, this
object, so it keeps an index in memory (the ids in inbox, processing and done; the depth;
the last sequence), read from the directories when the object is made: the listener's
duplicate, depth and sequence decisions cost no directory listing. The file system stays
authoritative for claims: ``claim`` lists ``inbox/`` (so it also finds, and quarantines,
entries it did not write) and the ``rename`` decides who wins, even across threads or
processes. An id that another claimer took is noticed by this object's next claim: it stays
known (a retry is a duplicate) and leaves the depth. The ``sequence`` file is rewritten in
place on every enqueue (one write; a private file that only a new spool object reads).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from zcoder.errors import RelayError
from zcoder.relay.envelope import Enqueue, Limits
from zcoder.relay.protocol import MESSAGE_ID_RE
from zcoder.relay.spool_entry import (
    ENTRY_NAME_RE,
    InvalidEntry,
    encode_entry,
    entry_name,
    read_entry,
    write_new,
)

__all__ = ["Claimed", "Spool"]

_PAUSED, _ACCEPTING = "paused", "accepting"
_RECEIPT = ".done"


@attrs.frozen
class Claimed:
    """One message taken from the inbox; ``path`` is its file in ``processing/``."""

    sequence: int
    envelope: Enqueue
    verified: bool
    path: Path


class Spool:
    """The queue of one receiving instance. ``create`` before use, ``remove`` at the end."""

    def __init__(self, root: Path, *, max_queue: int, limits: Limits | None = None) -> None:
        self.root = root
        self._dirs = {name: root / name for name in ("inbox", "processing", "done", "quarantine")}
        self._max_queue = max_queue
        self._limits = Limits() if limits is None else limits
        self._paused = _read_text(root / "state") == _PAUSED
        # The index: message id -> entry name in inbox/ and processing/, ids with a receipt
        # in done/ or taken by another claimer. Only this object writes the spool.
        self._inbox: dict[str, str] = {}
        self._processing: dict[str, str] = {}
        self._settled: set[str] = set()
        self._last = self._load_index()
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
        write_new(self.root, self.root / "sequence", b"%d\n" % self._last)
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
        if self.knows(mid):
            return "duplicate", None
        if self._paused:
            return "paused", None
        if self.depth() >= self._max_queue:
            return "full", None
        sequence = self._last + 1
        name = entry_name(sequence, mid)
        try:
            self._write_sequence(sequence)
            self._last = sequence
            write_new(
                self.root, self._dirs["inbox"] / name, encode_entry(envelope, verified=verified)
            )
        except OSError as exc:
            raise RelayError(f"cannot store the message in the spool: {exc.strerror}") from None
        self._inbox[mid] = name
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
        """Accepted, unfinished messages: those in ``inbox/`` plus ``processing/``."""
        return len(self._inbox) + len(self._processing)

    def knows(self, message_id: str) -> bool:
        """Whether ``message_id`` is in inbox, processing or done (or another claimer has it)."""
        return (
            message_id in self._inbox
            or message_id in self._processing
            or message_id in self._settled
        )

    def claim(self) -> Claimed | None:
        """Move the oldest inbox entry to ``processing/`` and parse it again.

        Entries that fail are quarantined and reported by ``take_problems``. Returns
        ``None`` when the inbox is empty (or another claimer took everything).
        """
        names = sorted(_listdir(self._dirs["inbox"]))
        self._notice_taken(set(names))
        for name in names:
            found = ENTRY_NAME_RE.fullmatch(name)
            source = self._dirs["inbox"] / name
            if found is None:
                self._quarantine(source, "its name is not <sequence>-<message-id>.json")
                continue
            mid = found.group(2)
            target = self._dirs["processing"] / name
            try:
                os.rename(source, target)
            except FileNotFoundError:  # another claimer won this one
                self._notice_taken({n for n in names if n != name})
                continue
            try:
                envelope, verified = read_entry(target, mid, self._limits)
            except InvalidEntry as exc:
                self._forget(mid, name)
                self._quarantine(target, str(exc))
                continue
            self._inbox.pop(mid, None)
            self._processing[mid] = name
            self._changed()
            return Claimed(int(found.group(1)), envelope, verified, target)
        return None

    def complete(self, claimed: Claimed) -> None:
        """Leave an empty receipt in ``done/`` (first), then drop the payload. A spool that
        is already gone (the relay shut down meanwhile) is not an error; a receipt that
        cannot be written raises ``RelayError`` after the message is settled all the same."""
        if claimed.path.parent != self._dirs["processing"]:
            raise ValueError(f"{claimed.path} is not in this spool's processing directory")
        mid = claimed.envelope.message_id
        receipt = self._dirs["done"] / f"{mid}{_RECEIPT}"
        problem = ""
        try:
            os.close(os.open(receipt, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        except FileNotFoundError:
            if not self.root.exists():
                return
            problem = "its done/ directory is missing"
        except OSError as exc:
            problem = exc.strerror or str(exc)
        # Settled in memory whatever the disk said: the message never runs again (the index
        # keeps it a duplicate) and never counts as waiting (a worker would claim forever).
        with contextlib.suppress(OSError):
            claimed.path.unlink(missing_ok=True)
        self._settled.add(mid)
        if self._processing.get(mid) == claimed.path.name:
            del self._processing[mid]
        self._changed()
        if problem:
            raise RelayError(f"cannot write the relay receipt of {mid}: {problem}")

    def unclaim(self, claimed: Claimed) -> None:
        """Put a claimed message back into ``inbox/`` under its own name, so it is the
        next to be claimed again (its sequence is the lowest there): for a turn that never
        reached the model, so nothing of it was executed.

        Raises ``RelayError`` when it cannot be put back (the caller then settles it with
        ``complete``); ``ValueError`` for an entry of another spool. A spool that is already
        gone (the relay shut down meanwhile) is not an error: nothing is left to put back."""
        if claimed.path.parent != self._dirs["processing"]:
            raise ValueError(f"{claimed.path} is not in this spool's processing directory")
        mid, name = claimed.envelope.message_id, claimed.path.name
        if self._processing.get(mid) != name:
            raise RelayError(f"the relayed message {mid} is not being processed")
        try:
            os.rename(claimed.path, self._dirs["inbox"] / name)
        except FileNotFoundError:
            if not self.root.exists():
                del self._processing[mid]
                return
            raise RelayError(
                f"cannot put the relayed message {mid} back in the queue: it is gone"
            ) from None
        except OSError as exc:
            raise RelayError(
                f"cannot put the relayed message {mid} back in the queue: {exc.strerror or exc}"
            ) from None
        del self._processing[mid]
        self._inbox[mid] = name
        self._work.set()
        self._work = trio.Event()
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

    def _load_index(self) -> int:
        """Fill the index from the directories; return the last sequence given out (the
        sequence file, but never below a number still queued)."""
        text = _read_text(self.root / "sequence")
        last = int(text) if text.isdigit() else 0
        for key, index in (("inbox", self._inbox), ("processing", self._processing)):
            for name in _listdir(self._dirs[key]):
                found = ENTRY_NAME_RE.fullmatch(name)
                if found:
                    index[found.group(2)] = name
                    last = max(last, int(found.group(1)))
        for name in _listdir(self._dirs["done"]):
            mid = name.removesuffix(_RECEIPT)
            if name.endswith(_RECEIPT) and MESSAGE_ID_RE.fullmatch(mid):
                self._settled.add(mid)
        return last

    def _notice_taken(self, present: set[str]) -> None:
        # Entries of the index that left the inbox without our claim: another claimer has
        # them. Still known, so that a retry stays a duplicate; no longer our depth.
        for mid, name in list(self._inbox.items()):
            if name not in present and self._inbox.pop(mid, None) is not None:
                self._settled.add(mid)

    def _forget(self, mid: str, name: str) -> None:
        # A quarantined entry is in none of inbox, processing or done any more.
        if self._inbox.get(mid) == name:
            del self._inbox[mid]

    def _write_sequence(self, sequence: int) -> None:
        # In place, one write: the number only grows, so it never leaves a longer tail.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root / "sequence", flags, 0o600)
        try:
            os.pwrite(fd, b"%d\n" % sequence, 0)
        finally:
            os.close(fd)

    def _write_state(self) -> None:
        state = (_PAUSED if self._paused else _ACCEPTING).encode()
        write_new(self.root, self.root / "state", state)

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
