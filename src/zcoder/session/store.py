"""Saved sessions: one file per conversation, scoped to (workspace, profile).

Layout: ``<ZCODER_HOME>/sessions/<scope>/<id>.json`` where ``<scope>`` is the first 32 hex
digits of sha256(workspace NUL profile); ``.scope.json`` beside them records the workspace and
profile for people reading the directory. Directories are 0700, files 0600.

A save costs what it adds: the file is a snapshot line followed by one journal line per save
(``journal``), appended in place and flushed (``fdatasync``); now and then (when the
journal outgrows the snapshot) a save writes a fresh snapshot atomically instead (private
temp file, fsync, ``os.replace``, fsync of the directory). A crash mid-append leaves a torn
last line, which is ignored on load and overwritten by the next save; a crash mid-snapshot
leaves the previous file. Leftover ``.<id>.*.tmp`` files are ignored and removed the next
time the session is opened. An invalid file raises ``SessionCorrupt`` naming the path and
the reason; it is listed with its problem and never overwritten. Format-1 files (one JSON
object) still load; their next save rewrites them in format 2. A session is written only
once a model has answered in it, so a start that never reached a model server leaves nothing.

A process that has a session open holds ``fcntl.flock`` on ``<id>.lock`` (its pid written
inside for the message); the lock dies with the process, so it never goes stale. ``save``
is plain synchronous I/O and thread-safe; ``save_async`` runs it in a worker thread, after
taking what to write on the caller's thread (which may go on changing the session).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import secrets
import threading
import time
from pathlib import Path

import attrs
import trio

from zcoder.errors import SessionCorrupt, SessionError, SessionLocked, SessionNotFound
from zcoder.session.data import (
    DEFAULT_TITLE,
    TITLE_LIMIT,
    Session,
    SessionSummary,
    copy_session,
    parse_session,
    title_from_prompt,
)
from zcoder.session.files import SessionLocks, write_atomic
from zcoder.session.journal import FORMAT_VERSION, MAX_FILE_BYTES, Decoded
from zcoder.session.saves import SavedFile, write_session

__all__ = [
    "DEFAULT_TITLE",
    "FORMAT_VERSION",
    "TITLE_LIMIT",
    "Session",
    "SessionStore",
    "SessionSummary",
    "find_session",
    "is_session_id",
    "title_from_prompt",
]

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_session_id(text: str) -> bool:
    """Whether ``text`` has the form of a session id (letters, digits, ``_``, ``-``)."""
    return _ID.fullmatch(text) is not None


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not is_session_id(session_id):
        raise SessionNotFound(
            f"no session {session_id!r}: a session id has only letters, digits, '_' and '-'"
        )


class SessionStore:
    """The sessions of one (workspace, profile). Holds the locks of the sessions it opened."""

    def __init__(self, home: Path, workspace: Path, profile: str) -> None:
        self.workspace = str(workspace)
        self.profile = profile
        scope = f"{self.workspace}\0{profile}".encode("utf-8", "surrogateescape")
        self.root = Path(home) / "sessions"
        self.dir = self.root / hashlib.sha256(scope).hexdigest()[:32]
        self._locks = SessionLocks(self.dir)
        self._saved: dict[str, SavedFile] = {}
        self._mutex = threading.Lock()  # saves may run in worker threads
        self._seq = itertools.count(1)

    def create(self, model: str) -> Session:
        """A new, empty session, locked by this process; written by the first ``save``."""
        self._ensure_dir()
        for _ in range(32):
            sid = f"{int(time.time())}_{secrets.randbelow(100000):05d}"
            if sid in self._locks or self._file(sid).exists():
                continue
            try:
                self._locks.acquire(sid)
            except SessionLocked:
                continue
            if self._file(sid).exists():  # another process saved it between our checks
                self._release_id(sid)
                continue
            now = time.time()
            self._saved[sid] = SavedFile()
            return Session(
                id=sid, workspace=self.workspace, profile=self.profile, model=model,
                created_at=now, updated_at=now,
            )  # fmt: skip
        raise SessionError(f"could not allocate a new session id in {self.dir}")

    def open(self, session_id: str) -> Session:
        """Load and lock a saved session (SessionNotFound / SessionCorrupt / SessionLocked)."""
        _check_id(session_id)
        path = self._file(session_id)
        if not path.is_file():
            raise SessionNotFound(
                f"no saved session {session_id} for {self.workspace} ({self.profile} profile)"
            )
        self._locks.acquire(session_id)
        try:
            session, decoded = self._read(path)
            if (session.workspace, session.profile) != (self.workspace, self.profile):
                raise SessionCorrupt(
                    f"session file {path} is corrupt: it belongs to {session.workspace} "
                    f"({session.profile} profile)"
                )
        except BaseException:
            self._release_id(session_id)
            raise
        for leftover in self.dir.glob(f".{session_id}.json.*.tmp"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        with self._mutex:
            self._saved[session_id] = SavedFile(
                copy_session(session, session.updated_at),
                decoded.end,
                decoded.base,
                decoded.rewrite,
            )
        return session

    def peek(self, session_id: str) -> Session:
        """Read a saved session without opening it (no lock): what it says about itself,
        for the set-up before the run. The same errors as ``open`` but ``SessionLocked``."""
        _check_id(session_id)
        path = self._file(session_id)
        session, _ = self._read(path)
        if (session.workspace, session.profile) != (self.workspace, self.profile):
            raise SessionCorrupt(f"session file {path} is corrupt: it belongs elsewhere")
        return session

    def save(self, session: Session) -> bool:
        """Write what changed since the last save and set ``updated_at``; it must be open
        here. ``False`` when nothing was written because no model answered in it yet."""
        image, seq = self._capture(session)
        written = self._write(image, seq)
        session.updated_at = image.updated_at
        return written

    async def save_async(self, session: Session) -> bool:
        """``save`` with the disk work in a worker thread, so that the Trio thread goes on
        serving the relay and the keyboard. Not cancellable: a save once asked for is done."""
        image, seq = self._capture(session)
        with trio.CancelScope(shield=True):
            written = await trio.to_thread.run_sync(self._write, image, seq)
        session.updated_at = image.updated_at
        return written

    def _capture(self, session: Session) -> tuple[Session, int]:
        """A private copy of what to write (cheap: the lists share their items)."""
        if session.id not in self._locks:
            raise SessionError(f"session {session.id} is not open in this process; cannot save")
        if (session.workspace, session.profile) != (self.workspace, self.profile):
            raise SessionError(f"session {session.id} belongs to another workspace or profile")
        return copy_session(session, time.time()), next(self._seq)

    def _write(self, image: Session, seq: int) -> bool:
        with self._mutex:
            saved = self._saved.get(image.id)
            if saved is None or image.id not in self._locks:
                raise SessionError(f"session {image.id} is not open in this process; cannot save")
            if seq < saved.seq:  # a later save already wrote more
                return True
            if saved.image is None and not image.worth_keeping():
                return False
            try:
                self._saved[image.id] = write_session(saved, image, seq, self.dir)
            except (TypeError, ValueError, RecursionError) as exc:
                raise SessionError(f"session {image.id} cannot be saved: {exc}") from None
            except OSError as exc:
                # What reached the file is unknown: the next save writes a fresh snapshot.
                self._saved[image.id] = attrs.evolve(saved, rewrite=True)
                raise SessionError(
                    f"session {image.id} cannot be saved in {self.dir}: {exc.strerror or exc}"
                ) from None
            return True

    def is_saved(self, session_id: str) -> bool:
        """Whether a file of the session exists (a new session has none before its first
        ``save``)."""
        return _ID.fullmatch(session_id) is not None and self._file(session_id).is_file()

    def release(self, session: Session) -> None:
        """Unlock the session (idempotent). Unsaved changes are not written."""
        self._release_id(session.id)

    def close(self) -> None:
        """Release every session this store holds (idempotent)."""
        with self._mutex:
            held = list(self._locks)
        for session_id in held:
            self._release_id(session_id)

    def _release_id(self, session_id: str) -> None:
        with self._mutex:
            self._saved.pop(session_id, None)
            self._locks.release(session_id)

    def list(self) -> list[SessionSummary]:
        """Every session of this scope, newest first; corrupt ones carry their ``problem``."""
        try:
            names = sorted(os.listdir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise SessionError(f"cannot list sessions in {self.dir}: {exc.strerror}") from None
        found = [self._summary(n[:-5]) for n in names if n.endswith(".json")]
        rows = [r for r in found if r is not None]
        return sorted(rows, key=lambda r: (r.updated_at, r.id), reverse=True)

    def _summary(self, sid: str) -> SessionSummary | None:
        if not _ID.fullmatch(sid):
            return None
        path = self._file(sid)
        try:
            s, _ = self._read(path)
        except SessionNotFound:
            return None
        except SessionCorrupt as exc:
            with contextlib.suppress(OSError):
                return SessionSummary(sid, "", "", path.stat().st_mtime, 0, problem=str(exc))
            return None
        return SessionSummary.of(s)

    def _file(self, sid: str) -> Path:
        return self.dir / f"{sid}.json"

    def _read(self, path: Path) -> tuple[Session, Decoded]:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise SessionNotFound(f"no saved session {path.stem}") from None
        except OSError as exc:
            raise SessionCorrupt(f"session file {path} cannot be read: {exc.strerror}") from None
        return parse_session(path, data)

    def _ensure_dir(self) -> None:
        try:
            self.root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            for d in (self.root, self.dir):
                d.mkdir(mode=0o700, exist_ok=True)
            for d in (self.root, self.dir):
                os.chmod(d, 0o700)  # mkdir's mode is masked by umask; make it exact
            scope = self.dir / ".scope.json"
            if not scope.exists():
                info = {"workspace": self.workspace, "profile": self.profile}
                write_atomic(self.dir, ".scope.json", json.dumps(info).encode("ascii"))
        except OSError as exc:
            raise SessionError(f"cannot create the session directory {self.dir}: {exc}") from None


def find_session(home: Path, session_id: str) -> list[tuple[str, str]]:
    """The (workspace, profile) scopes under ``home`` that hold a readable session
    ``session_id``, as each file says (a file that disagrees with its directory, or cannot
    be read, is not counted: opening it would fail)."""
    if not _ID.fullmatch(session_id):
        return []
    found: list[tuple[str, str]] = []
    for path in sorted((Path(home) / "sessions").glob(f"*/{session_id}.json")):
        try:
            session, _ = parse_session(path, path.read_bytes()[: MAX_FILE_BYTES + 1])
        except (OSError, SessionError):
            continue
        if SessionStore(home, Path(session.workspace), session.profile).dir == path.parent:
            found.append((session.workspace, session.profile))
    return found
