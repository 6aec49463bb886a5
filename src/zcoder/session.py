"""Saved sessions: one JSON file per conversation, scoped to (workspace, profile).

Layout: ``<ZCODER_HOME>/sessions/<scope>/<id>.json`` where ``<scope>`` is the first 32 hex
digits of sha256(workspace NUL profile); ``.scope.json`` beside them records the workspace and
profile for people reading the directory. Directories are 0700, files 0600.

Saving is atomic (private temp file, fsync, ``os.replace``, fsync of the directory), so a
crash mid-write leaves the previous file intact; leftover ``.<id>.*.tmp`` files are ignored
and removed the next time the session is opened. A torn or invalid file raises
``SessionCorrupt`` naming the path and the reason; it is listed with its problem and never
overwritten. A process that has a session open holds ``fcntl.flock`` on ``<id>.lock`` (its
pid written inside for the message); the lock dies with the process, so it never goes stale.
Plain synchronous file I/O on small files: callers may run it from trio directly or in
``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

import attrs
import cattrs

from zcoder.conversation import Message, TranscriptEvent
from zcoder.errors import SessionCorrupt, SessionError, SessionLocked, SessionNotFound
from zcoder.session_files import SessionLocks, write_atomic

__all__ = [
    "DEFAULT_TITLE",
    "FORMAT_VERSION",
    "TITLE_LIMIT",
    "Session",
    "SessionStore",
    "SessionSummary",
    "title_from_prompt",
]

DEFAULT_TITLE = "New session"
TITLE_LIMIT = 42
FORMAT_VERSION = 1
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_FILE_BYTES = 64 * 1024 * 1024


def title_from_prompt(text: str) -> str:
    """A prompt flattened to one line (whitespace runs become one space), cut to 42 chars."""
    return re.sub(r"\s+", " ", text).strip()[:TITLE_LIMIT].rstrip()


@attrs.define(kw_only=True)
class Session:
    """One saved conversation: model history (no system message), visible events, ledger."""

    id: str
    workspace: str
    profile: str
    model: str
    title: str = DEFAULT_TITLE
    created_at: float = attrs.field(factory=time.time)
    updated_at: float = attrs.field(factory=time.time)
    history: list[Message] = attrs.field(factory=list)
    events: list[TranscriptEvent] = attrs.field(factory=list)
    user_requests: list[str] = attrs.field(factory=list)

    def record_user_prompt(self, text: str) -> None:
        """Add a local user prompt to the ledger; the first non-blank one titles the session.

        Relayed text never comes here: it enters ``history`` and ``events`` only.
        """
        titled = any(title_from_prompt(p) for p in self.user_requests)
        self.user_requests.append(text)
        if not titled and self.title == DEFAULT_TITLE and title_from_prompt(text):
            self.title = title_from_prompt(text)


@attrs.frozen
class SessionSummary:
    """One row of ``SessionStore.list``; ``problem`` is set (and the rest empty) when corrupt."""

    id: str
    title: str
    model: str
    updated_at: float
    messages: int
    problem: str = ""


def _strict(kind: type, label: str) -> Any:
    def hook(value: Any, _: Any) -> Any:
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise TypeError(f"expected {label}, got {type(value).__name__}")
        return value

    return hook


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    # cattrs would coerce (str(5) == "5"); a session file with the wrong types is corrupt.
    for kind, label in ((str, "a string"), (float, "a number"), (int, "an integer")):
        conv.register_structure_hook(kind, _strict(kind, label))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    return conv


_converter = _make_converter()


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise SessionNotFound(
            f"no session {session_id!r}: a session id has only letters, digits, '_' and '-'"
        )


def _parse(path: Path, data: bytes) -> Session:
    def corrupt(reason: str) -> SessionCorrupt:
        return SessionCorrupt(f"session file {path} is corrupt: {reason}")

    if len(data) > _MAX_FILE_BYTES:
        raise corrupt(f"larger than {_MAX_FILE_BYTES} bytes")
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise corrupt(f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise corrupt("not a JSON object")
    version = raw.pop("format", None)
    if version != FORMAT_VERSION:
        raise corrupt(f"format {version!r} is not the supported {FORMAT_VERSION}")
    try:
        session = _converter.structure(raw, Session)
    except cattrs.BaseValidationError as exc:
        raise corrupt("; ".join(cattrs.transform_error(exc))) from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise corrupt(f"invalid content ({exc!r})") from None
    if session.id != path.stem:
        raise corrupt(f"it holds session {session.id!r}")
    return session


class SessionStore:
    """The sessions of one (workspace, profile). Holds the locks of the sessions it opened."""

    def __init__(self, home: Path, workspace: Path, profile: str) -> None:
        self.workspace = str(workspace)
        self.profile = profile
        scope = f"{self.workspace}\0{profile}".encode("utf-8", "surrogateescape")
        self.root = Path(home) / "sessions"
        self.dir = self.root / hashlib.sha256(scope).hexdigest()[:32]
        self._locks = SessionLocks(self.dir)

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
            session = self._read(path)
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
        return session

    def save(self, session: Session) -> None:
        """Write the session atomically and set ``updated_at``; it must be open here."""
        if session.id not in self._locks:
            raise SessionError(f"session {session.id} is not open in this process; cannot save")
        if (session.workspace, session.profile) != (self.workspace, self.profile):
            raise SessionError(f"session {session.id} belongs to another workspace or profile")
        now = time.time()
        body = _converter.unstructure(session)
        body["updated_at"] = now
        try:
            data = json.dumps({"format": FORMAT_VERSION, **body}, separators=(",", ":"))
            if len(data) > _MAX_FILE_BYTES:  # open would refuse it: keep the last good file
                raise ValueError(f"it would be over {_MAX_FILE_BYTES} bytes; start a new session")
            write_atomic(self.dir, f"{session.id}.json", data.encode("ascii"))
        except (TypeError, ValueError, RecursionError) as exc:
            raise SessionError(f"session {session.id} cannot be saved: {exc}") from None
        except OSError as exc:
            raise SessionError(
                f"session {session.id} cannot be saved in {self.dir}: {exc.strerror or exc}"
            ) from None
        session.updated_at = now

    def is_saved(self, session_id: str) -> bool:
        """Whether a file of the session exists (a new session has none before its first
        ``save``)."""
        return _ID.fullmatch(session_id) is not None and self._file(session_id).is_file()

    def release(self, session: Session) -> None:
        """Unlock the session (idempotent). Unsaved changes are not written."""
        self._release_id(session.id)

    def _release_id(self, session_id: str) -> None:
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

    def latest_id(self) -> str | None:
        """The most recently saved readable session, if any."""
        return next((r.id for r in self.list() if not r.problem), None)

    def _summary(self, sid: str) -> SessionSummary | None:
        if not _ID.fullmatch(sid):
            return None
        path = self._file(sid)
        try:
            s = self._read(path)
        except SessionNotFound:
            return None
        except SessionCorrupt as exc:
            with contextlib.suppress(OSError):
                return SessionSummary(sid, "", "", path.stat().st_mtime, 0, problem=str(exc))
            return None
        return SessionSummary(s.id, s.title, s.model, s.updated_at, len(s.history))

    def _file(self, sid: str) -> Path:
        return self.dir / f"{sid}.json"

    def _read(self, path: Path) -> Session:
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise SessionNotFound(f"no saved session {path.stem}") from None
        except OSError as exc:
            raise SessionCorrupt(f"session file {path} cannot be read: {exc.strerror}") from None
        return _parse(path, data)

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
