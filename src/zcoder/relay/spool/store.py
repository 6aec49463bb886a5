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
thread, so the in-process wake-up is ``changes`` (``changes.py``): every change of the
depth, the pause state or the quarantine is noted there, and whoever needs to know awaits
it; the spool calls out to nobody when a message is accepted. The spool has one writer, this
object, so it keeps an index in memory (the ids in inbox, processing and done; the depth;
the last sequence), read from the directories when the object is made: the listener's
duplicate, depth and sequence decisions cost no directory listing. The file system stays
authoritative for claims: ``claim`` lists ``inbox/`` (so it also finds, and quarantines,
entries it did not write) and the ``rename`` decides who wins, even across threads or
processes. An id that another claimer took is noticed by this object's next claim: it stays
known (a retry is a duplicate) and leaves the depth. The ``sequence`` file is rewritten in
place on every enqueue (one write; a private file that only a new spool object reads).

Faults (``fault.py``): the operations the foreground calls (``claim``, ``complete``,
``set_paused``, ``scan``) raise ``SpoolFault`` and nothing else when the file system
refuses them, ``damaged`` or not. The listener's ``enqueue`` never raises for a refusal: it
answers ``full`` (nothing stored) and hands the fault to the ``on_fault`` callbacks, once
per run of failed stores. Foreign entries are quarantined and reported (``take_problems``).

Longer than 400 lines on purpose: this object is the spool's one writer, and its index is
true only if every operation that moves an entry keeps it, here, beside the rename.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Container
from pathlib import Path

from zcoder.errors import RelayError
from zcoder.relay.changes import Changes
from zcoder.relay.envelope import Enqueue, Limits
from zcoder.relay.protocol import MESSAGE_ID_RE
from zcoder.relay.spool.entry import (
    ENTRY_NAME_RE,
    InvalidEntry,
    encode_entry,
    entry_name,
    read_entry,
    write_new,
)
from zcoder.relay.spool.fault import SPOOL_DIRS, SpoolFault, classify, layout_problem
from zcoder.relay.spool.news import Arrived, Claimed, Left, News, Refused, Withdrawn
from zcoder.relay.spool.quarantine import BAD_NAME, Quarantine, is_regular, planted

__all__ = [
    "Arrived",
    "Claimed",
    "Left",
    "News",
    "Refused",
    "Spool",
    "SpoolFault",
    "Withdrawn",
]

_PAUSED, _ACCEPTING = "paused", "accepting"
_RECEIPT = ".done"


class Spool:
    """The queue of one receiving instance. ``create`` before use, ``remove`` at the end."""

    def __init__(
        self,
        root: Path,
        *,
        max_queue: int,
        limits: Limits | None = None,
        changes: Changes | None = None,
    ) -> None:
        self.root = root
        self._dirs = {name: root / name for name in SPOOL_DIRS}
        self._max_queue = max_queue
        self._limits = Limits() if limits is None else limits
        self._paused = _read_text(root / "state") == _PAUSED
        # The index: message id -> entry name in inbox/ and processing/, ids with a receipt
        # in done/ or taken by another claimer. Only this object writes the spool.
        self._inbox: dict[str, str] = {}
        self._processing: dict[str, str] = {}
        self._settled: set[str] = set()
        self._withdrawn: set[str] = set()  # settled by their sender's cancel
        # Unfinished messages per sender: one sender may fill at most half of the queue.
        self._per_sender: collections.Counter[str] = collections.Counter()
        self._sender: dict[str, str] = {}  # unfinished message id -> its sender
        self._share = max(1, max_queue // 2)
        self._last = self._load_index()
        self.changes = Changes() if changes is None else changes
        self._quarantine = Quarantine(self._dirs["quarantine"], self._changed)
        self._fault_callbacks: list[Callable[[SpoolFault], None]] = []
        self._store_failing = False  # report a run of failed stores once
        self._news: list[News] = []  # since the last ``take_news``

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

    def on_fault(self, callback: Callable[[SpoolFault], None]) -> None:
        """Call ``callback`` with a fault no caller could be given: a store that failed
        (the listener answered ``full``) or damage noticed while a claim still succeeded."""
        self._fault_callbacks.append(callback)

    # -- the listener's side --------------------------------------------------------------

    def enqueue(self, envelope: Enqueue, *, verified: bool) -> tuple[str, int | None]:
        """Store one envelope; return the ack status and, when accepted, its 1-based place
        among the unfinished messages (the one being processed counts).

        Decides in this order: ``duplicate`` (the id is in inbox, processing or done, so a
        retry is idempotent even while paused or full), ``paused``, ``full`` (the queue is
        full, or this sender already has half of it: one sender cannot take the whole
        queue from the others), ``accepted``.
        A message the file system refuses to store is ``full`` too (no capacity; nothing
        of it is left in the queue), and the fault goes to the ``on_fault`` callbacks.
        """
        mid = envelope.message_id
        if not MESSAGE_ID_RE.fullmatch(mid):
            return "invalid", None
        if self.knows(mid):
            return "duplicate", None
        if self._paused:
            self._news.append(Refused(envelope))
            self._changed()
            return "paused", None
        if self.depth() >= self._max_queue:
            return "full", None
        if self._per_sender[envelope.sender_instance_id] >= self._share:
            return "full", None  # the others still get in
        sequence = self._last + 1
        name = entry_name(sequence, mid)
        try:
            self._write_sequence(sequence)
            self._last = sequence
            write_new(
                self.root, self._dirs["inbox"] / name, encode_entry(envelope, verified=verified)
            )
        except OSError as exc:
            fault = classify(exc, self.root, f"cannot store the relayed message {mid}")
            if fault.damaged or not self._store_failing:
                self._store_failing = not fault.damaged
                self._tell(fault)
            return "full", None
        self._store_failing = False
        self._inbox[mid] = name
        self._count(mid, envelope.sender_instance_id)
        self._news.append(Arrived(sequence, envelope, verified))
        self._changed()
        return "accepted", self.depth()

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        """Switch and persist the state; paused rejects new envelopes and keeps the
        accepted ones. The switch holds in memory (what the listener answers) even when
        the ``state`` file cannot be written: ``SpoolFault`` then says so."""
        if paused == self._paused:
            return
        self._paused = paused
        self._changed()
        try:
            self._write_state()
        except OSError as exc:
            state = _PAUSED if paused else _ACCEPTING
            raise classify(exc, self.root, f"cannot record the relay state {state!r}") from None

    # -- the foreground's side ------------------------------------------------------------

    def depth(self) -> int:
        """Accepted, unfinished messages: those in ``inbox/`` plus ``processing/``."""
        return len(self._inbox) + len(self._processing)

    def waiting(self) -> int:
        """Accepted messages not yet claimed (``inbox/``)."""
        return len(self._inbox)

    def knows(self, message_id: str) -> bool:
        """Whether ``message_id`` is in inbox, processing or done (or another claimer has it)."""
        return (
            message_id in self._inbox
            or message_id in self._processing
            or message_id in self._settled
        )

    def claim(self, skip: Container[str] = ()) -> Claimed | None:
        """Move the oldest inbox entry whose message id is not in ``skip`` (messages held
        for the user) to ``processing/`` and parse it again.

        Entries that fail are quarantined and reported by ``take_problems``; something
        planted where the entry goes in ``processing/`` is quarantined and reported as
        damage (``on_fault``), and the claim goes on. Returns ``None`` when the inbox is
        empty (or another claimer took everything); ``SpoolFault`` when the file system
        refuses the listing or the move.
        """
        try:
            names = sorted(os.listdir(self._dirs["inbox"]))
        except OSError as exc:
            raise classify(exc, self.root, "cannot list the relay inbox") from None
        self._notice_taken(set(names))
        for name in names:
            found = ENTRY_NAME_RE.fullmatch(name)
            source = self._dirs["inbox"] / name
            if found is None:
                self._quarantine.put(source, BAD_NAME)
                continue
            mid = found.group(2)
            if mid in skip:
                continue
            target = self._dirs["processing"] / name
            moved = self._move(source, target)
            if moved is None:  # another claimer won this one
                self._notice_taken({n for n in names if n != name})
                continue
            try:
                envelope, verified = read_entry(target, mid, self._limits)
            except InvalidEntry as exc:
                self._forget(mid, name)
                self._quarantine.put(target, str(exc))
                continue
            if self._inbox.pop(mid, None) is None:  # planted: ours from now on
                self._count(mid, envelope.sender_instance_id)
            self._quarantine.vetted.discard(name)
            self._processing[mid] = name
            self._changed()
            if moved:  # told once the message counts as running, not waiting
                self._tell(SpoolFault(planted(name), damaged=True))
            return Claimed(int(found.group(1)), envelope, verified, target)
        return None

    def scan(self) -> None:
        """Look for what does not belong, even while the queue is empty: quarantine (and
        report) an inbox entry with a bad name or one that fails ``read_entry`` (each name
        this object did not write is read once), and anything but a regular file in
        ``processing/``, which also raises ``SpoolFault`` as damage, as does a damaged
        layout. Cheap: a few ``lstat`` calls and two listings."""
        problem = layout_problem(self.root)
        if problem:
            raise SpoolFault(problem, damaged=True)
        try:
            waiting = os.listdir(self._dirs["inbox"])
            running = os.listdir(self._dirs["processing"])
        except OSError as exc:
            raise classify(exc, self.root, "cannot list the relay spool") from None
        self._quarantine.sweep_inbox(
            self._dirs["inbox"], waiting, set(self._inbox.values()), self._limits
        )
        ours = set(self._processing.values())
        name = self._quarantine.sweep_processing(self._dirs["processing"], running, ours)
        if name:
            raise SpoolFault(planted(name), damaged=True)

    def complete(self, claimed: Claimed) -> None:
        """Leave an empty receipt in ``done/`` (first), then drop the payload. A spool that
        is already gone (the relay shut down meanwhile) is not an error; a receipt that
        cannot be written raises ``SpoolFault`` after the message is settled all the same."""
        if claimed.path.parent != self._dirs["processing"]:
            raise ValueError(f"{claimed.path} is not in this spool's processing directory")
        mid = claimed.envelope.message_id
        receipt = self._dirs["done"] / f"{mid}{_RECEIPT}"
        fault: SpoolFault | None = None
        try:
            os.close(os.open(receipt, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not os.path.lexists(self.root):
                return
            fault = classify(exc, self.root, f"cannot write the relay receipt of {mid}")
        # Settled in memory whatever the disk said: the message never runs again (the index
        # keeps it a duplicate) and never counts as waiting (a worker would claim forever).
        with contextlib.suppress(OSError):
            claimed.path.unlink(missing_ok=True)
        self._settled.add(mid)
        if self._processing.get(mid) == claimed.path.name:
            del self._processing[mid]
            self._finished(mid)
        self._changed()
        if fault is not None:
            raise fault

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
                self._finished(mid)
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
        self._changed()

    def withdraw(self, message_id: str, sender_instance_id: str) -> str:
        """Remove a message its sender withdraws (zcoder's ``cancel``): ``withdrawn`` when
        it was still waiting in ``inbox/`` (it is settled as by ``complete``: a retry of it
        stays a ``duplicate``; a repeated cancel is ``withdrawn`` again), ``too_late`` when
        it is being processed, ``unknown`` when this sender has no such message here.
        Only the sender's own ids qualify: every accepted id begins with its sender's id.
        ``SpoolFault`` when the file system refuses the removal (nothing changed)."""
        if not message_id.startswith(f"{sender_instance_id}-"):
            return "unknown"
        if message_id in self._processing:
            return "too_late"
        if message_id in self._withdrawn:
            return "withdrawn"
        name = self._inbox.get(message_id)
        if name is None:
            return "too_late" if message_id in self._settled else "unknown"
        receipt = self._dirs["done"] / f"{message_id}{_RECEIPT}"
        try:
            os.close(os.open(receipt, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            os.unlink(self._dirs["inbox"] / name)
        except FileNotFoundError:  # a claimer took it meanwhile
            return "too_late"
        except OSError as exc:
            raise classify(
                exc, self.root, f"cannot withdraw the relayed message {message_id}"
            ) from None
        del self._inbox[message_id]
        self._finished(message_id)
        self._news.append(Withdrawn(message_id))
        self._settled.add(message_id)
        self._withdrawn.add(message_id)
        self._changed()
        return "withdrawn"

    async def wait_for_work(self) -> None:
        """Return once ``depth() > 0`` (at once if it already is); woken by ``enqueue``."""
        while self.depth() == 0:
            await self.changes.wait(self.changes.count)

    def take_problems(self) -> list[str]:
        """The quarantine reports since the last call (for the transcript)."""
        return self._quarantine.take_problems()

    def take_news(self) -> list[News]:
        """What entered and left ``inbox/`` since the last call, in order, other than by
        this object's ``claim`` and ``unclaim``: so that whoever keeps the waiting
        messages in memory never reads the inbox again (O(1) per message)."""
        news, self._news = self._news, []
        return news

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
                    self._count(found.group(2), _sender_of(found.group(2)))
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
                self._finished(mid)
                self._settled.add(mid)
                self._news.append(Left(mid))

    def _forget(self, mid: str, name: str) -> None:
        # A quarantined entry is in none of inbox, processing or done any more.
        if self._inbox.get(mid) == name:
            del self._inbox[mid]
            self._finished(mid)
            self._news.append(Left(mid))

    def _count(self, mid: str, sender: str) -> None:
        self._sender[mid] = sender
        self._per_sender[sender] += 1

    def _finished(self, mid: str) -> None:
        """``mid`` no longer counts in its sender's share (settled, or gone)."""
        sender = self._sender.pop(mid, None)
        if sender is None:
            return
        self._per_sender[sender] -= 1
        if self._per_sender[sender] <= 0:
            del self._per_sender[sender]

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

    def _move(self, source: Path, target: Path) -> bool | None:
        """Rename an inbox entry into ``processing/``: ``False``, or ``True`` when something
        planted at ``target`` had to be quarantined first (damage, for the caller to tell);
        ``None`` when another claimer took it; any other refusal is ``SpoolFault``."""
        try:
            os.rename(source, target)
            return False
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not os.path.lexists(source):
                return None
            if not os.path.lexists(target) or is_regular(target):
                raise classify(exc, self.root, f"cannot claim {source.name}") from None
        self._quarantine.put(target, "it is not a regular file")
        try:
            os.rename(source, target)
        except OSError as exc:
            raise classify(exc, self.root, f"cannot claim {source.name}") from None
        return True

    def _tell(self, fault: SpoolFault) -> None:
        for callback in self._fault_callbacks:
            callback(fault)

    def _changed(self) -> None:
        self.changes.note()


def _sender_of(message_id: str) -> str:
    """The sender's instance id an accepted message id begins with: ``<pid>-<nonce>``, the
    nonce without a dash (``INSTANCE_ID_RE``)."""
    return "-".join(message_id.split("-", 2)[:2])


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(64).strip()
    except OSError:  # missing, or not a file: as good as missing for a new spool object
        return ""
