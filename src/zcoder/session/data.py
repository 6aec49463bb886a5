"""The data of a saved session and its strict reading: ``Session``, ``SessionSummary``,
the title rule, and the converter that turns a file's JSON into a ``Session`` (a value of
the wrong type is damage, never coerced). Pure, floor 2.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import attrs
import cattrs

from zcoder.conversation import Message, TranscriptEvent
from zcoder.errors import SessionCorrupt
from zcoder.session.journal import MAX_FILE_BYTES, Decoded, decode

__all__ = [
    "DEFAULT_TITLE",
    "TITLE_LIMIT",
    "Session",
    "SessionServer",
    "SessionSummary",
    "converter",
    "copy_session",
    "parse_session",
    "title_from_prompt",
]

DEFAULT_TITLE = "New session"
TITLE_LIMIT = 42


def title_from_prompt(text: str) -> str:
    """A prompt flattened to one line (whitespace runs become one space), cut to 42 chars."""
    return re.sub(r"\s+", " ", text).strip()[:TITLE_LIMIT].rstrip()


@attrs.frozen
class SessionServer:
    """The model server a session last talked to: its base URL and its API (``ollama`` or
    ``openai``), as ``--host`` and ``--api`` would give them. ``--resume`` reconnects to it;
    to a server zcoder started for ``--gguf FILE`` (``gguf``: the file, "" for any other),
    whose address died with its run, it starts the server for that file again."""

    host: str
    api: str
    gguf: str = ""


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
    # Set when a model answers in it; None (a file written before it was kept) is unknown.
    server: SessionServer | None = None
    # The --agent-name it ran under ("" none): --resume brings it back with the rest.
    agent_name: str = ""
    # Begun by a one-shot run (zcoder -p) and not opened in the app since: /sessions lists
    # such runs after the app's sessions, only the newest few, so scripts cannot bury them.
    oneshot: bool = False

    def record_user_prompt(self, text: str) -> None:
        """Add a local user prompt to the ledger; the first non-blank one titles the session.

        Relayed text never comes here: it enters ``history`` and ``events`` only.
        """
        titled = any(title_from_prompt(p) for p in self.user_requests)
        self.user_requests.append(text)
        if not titled and self.title == DEFAULT_TITLE and title_from_prompt(text):
            self.title = title_from_prompt(text)

    def worth_keeping(self) -> bool:
        """Whether a model has answered in it: until then a save writes nothing, so a start
        that never reached a model server leaves no empty session behind."""
        return any(m.role == "assistant" for m in self.history)


@attrs.frozen
class SessionSummary:
    """One row of ``SessionStore.list``; ``problem`` is set (and the rest empty) when corrupt."""

    id: str
    title: str
    model: str
    updated_at: float
    messages: int
    problem: str = ""
    oneshot: bool = False

    @classmethod
    def of(cls, session: Session) -> SessionSummary:
        """The row of a session that was read (or is open) without a problem."""
        return cls(
            session.id,
            session.title,
            session.model,
            session.updated_at,
            len(session.history),
            oneshot=session.oneshot,
        )


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


converter = _make_converter()


def copy_session(session: Session, updated_at: float) -> Session:
    """A copy whose lists are its own (their items are frozen, so they are shared)."""
    return attrs.evolve(
        session,
        history=list(session.history),
        events=list(session.events),
        user_requests=list(session.user_requests),
        updated_at=updated_at,
    )


def parse_session(path: Path, data: bytes) -> tuple[Session, Decoded]:
    def corrupt(reason: str) -> SessionCorrupt:
        return SessionCorrupt(f"session file {path} is corrupt: {reason}")

    if len(data) > MAX_FILE_BYTES:
        raise corrupt(f"larger than {MAX_FILE_BYTES} bytes")
    decoded = decode(data, corrupt)
    try:
        session = converter.structure(decoded.body, Session)
    except cattrs.BaseValidationError as exc:
        raise corrupt("; ".join(cattrs.transform_error(exc))) from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise corrupt(f"invalid content ({exc!r})") from None
    if session.id != path.stem:
        raise corrupt(f"it holds session {session.id!r}")
    return session, decoded
