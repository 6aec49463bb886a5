"""The one exception tree of zcoder.

Foreign exceptions (httpx, OSError, cattrs) are translated once, at the boundary that
meets them; everything above sees only these. ``trio.Cancelled`` is never caught here.
Every exception class that leaves its module is defined here (modules re-export the ones
they raise, e.g. ``relay.envelope.Rejected``). The only others are private signals that
never leave their module (``relay.client._Ambiguous``, ``relay.envelope._FieldError``,
``relay.manifest._Bad``, ``shell.guard._Blocked``). ``ZcoderError`` itself is never raised: a
problem the UI shows is raised as the subclass that says what failed.

    ZcoderError
    ├── ConfigError              a bad option or environment value (names it)
    ├── LocalServerError         the server for --gguf FILE cannot start (says why)
    │   └── NotGguf              the file's GGUF metadata cannot be read
    ├── ModelError               talking to the model server failed
    │   ├── ServerUnavailable    cannot connect (after the one retry)
    │   │   ├── LocalServerExited  the server zcoder started for --gguf exited (says how)
    │   │   └── NoServerFound    no host given and none detected (says what was tried)
    │   ├── ModelHTTPError       HTTP 4xx/5xx, with the server's ``error`` text
    │   ├── StreamStalled        no byte within the stall deadline
    │   ├── MalformedStream      a line that is not a valid chat chunk
    │   ├── StreamErrorLine      an ``{"error": ...}`` line inside a 200 stream
    │   └── IncompleteStream     the stream ended without ``done: true``
    ├── SessionError             the session store
    │   ├── SessionCorrupt       a torn or invalid session file
    │   ├── SessionLocked        another process has the session open
    │   └── SessionNotFound      no session with that id
    ├── WorkspaceError           a path outside the workspace or not usable
    ├── ToolError                a tool call cannot be carried out (the model sees the message)
    ├── CommandError             a user's command (``/agents pause``...) cannot be carried out
    ├── CheckpointError          a checkpoint cannot be taken, read or undone (says why)
    ├── QuestionExpired          nobody answered a relayed turn's question in time
    └── RelayError               the inter-agent relay
        ├── RelayUnavailable     the relay cannot run here (reason says why)
        ├── UnsafeRelayDir       the shared relay directory is not safe to use
        ├── FrameError           a frame that violates the wire format
        ├── RelayTransportError  a peer could not be reached or answered badly
        ├── Rejected             a request answered with a non-accepting ack (its status)
        ├── InvalidEntry         a spool entry that cannot be trusted
        └── SpoolFault           the file system refused a spool operation (damaged or not)
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "CommandError",
    "ConfigError",
    "FrameError",
    "IncompleteStream",
    "InvalidEntry",
    "LocalServerError",
    "LocalServerExited",
    "MalformedStream",
    "ModelError",
    "ModelHTTPError",
    "NoServerFound",
    "NotGguf",
    "QuestionExpired",
    "Rejected",
    "RelayError",
    "RelayTransportError",
    "RelayUnavailable",
    "ServerUnavailable",
    "SessionCorrupt",
    "SessionError",
    "SessionLocked",
    "SessionNotFound",
    "SpoolFault",
    "StreamErrorLine",
    "StreamStalled",
    "ToolError",
    "UnsafeRelayDir",
    "WorkspaceError",
    "ZcoderError",
]


class ZcoderError(Exception):
    """Base of every error zcoder raises on purpose; caught, never raised itself."""


class ConfigError(ZcoderError):
    """An option or environment value is invalid; the message names it and what is accepted."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


class LocalServerError(ZcoderError):
    """The model server zcoder starts for ``--gguf FILE`` cannot start: the extra is not
    installed, the file is not a model, or the server failed or was not ready in time."""


class NotGguf(LocalServerError):
    """A ``--gguf`` file whose GGUF metadata zcoder cannot read (the message says why)."""


class ModelError(ZcoderError):
    """Talking to the model server failed (the client that raised it knows which kind of
    server it speaks to: its description names that kind, ``agent/rounds.py``)."""


class ServerUnavailable(ModelError):
    """The server could not be reached; ``reason`` is the low-level cause, if known."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class LocalServerExited(ServerUnavailable):
    """The server zcoder started for ``--gguf`` exited; the message says how, whether
    zcoder started it again, and what to do (it is shown as it is)."""


class NoServerFound(ServerUnavailable):
    """No host was configured and auto-detection found none; the message says what was
    tried and how to point zcoder at a server (it is shown as it is)."""


class ModelHTTPError(ModelError):
    """The server answered with an HTTP error status.

    ``server_message`` is the server's own text (with a hint the client added);
    ``model_missing`` is set when the server said the requested model does not exist, and
    ``speaks_openai`` when a 404 came from a server that serves the OpenAI-compatible API
    instead of the one asked for.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        model_missing: bool = False,
        speaks_openai: bool = False,
    ) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.server_message = message
        self.model_missing = model_missing
        self.speaks_openai = speaks_openai


class StreamStalled(ModelError):
    """The stream produced nothing within the stall deadline."""


class MalformedStream(ModelError):
    """The stream held a line that is not a valid chunk."""


class StreamErrorLine(ModelError):
    """The server reported an error inside a streamed response."""


class IncompleteStream(ModelError):
    """The stream ended without its final ``done: true`` chunk."""


class SessionError(ZcoderError):
    """The session store failed."""


class SessionCorrupt(SessionError):
    """A session file is torn or invalid."""


class SessionLocked(SessionError):
    """Another live process holds the session."""


class SessionNotFound(SessionError):
    """No session has that id."""


class WorkspaceError(ZcoderError):
    """A path is outside the workspace or cannot be used."""


class ToolError(ZcoderError):
    """A tool call cannot be carried out; the message is what the model sees after ``Error: ``."""


class CheckpointError(ZcoderError):
    """A checkpoint cannot be taken, read or undone; the message says why, in one line."""


class CommandError(ZcoderError):
    """A command the user gave cannot be carried out; the message is one finished line
    (what failed and what to do)."""


class QuestionExpired(ZcoderError):
    """Nobody answered a relayed turn's question within ``seconds`` (``[relay]
    question_timeout``): it counts as no, and the turn goes on. ``asked`` is false for a
    question not asked at all, because an earlier one of the same turn expired."""

    def __init__(self, seconds: float, *, asked: bool = True) -> None:
        super().__init__(f"nobody answered in {seconds:g} s")
        self.seconds = seconds
        self.asked = asked


class RelayError(ZcoderError):
    """The inter-agent relay failed."""


class RelayUnavailable(RelayError):
    """The relay cannot run in this process; the message is the reason."""


class UnsafeRelayDir(RelayError):
    """The shared relay directory is unsafe (symlink, other owner, open permissions...)."""


class FrameError(RelayError):
    """A frame violates the wire format."""


class RelayTransportError(RelayError):
    """A peer could not be reached, or answered with something unusable."""


class Rejected(RelayError):
    """A request that gets a non-accepting ack: ``status`` and the request's ``message_id``
    (``""`` when it could not be read), ``reason`` for logs."""

    def __init__(self, status: str, message_id: str, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.message_id = message_id
        self.reason = reason


class InvalidEntry(RelayError):
    """A spool entry that cannot be trusted; the message says why."""


class SpoolFault(RelayError):
    """A spool operation the file system refused. ``damaged`` (the relay must stop) or a
    storage failure (full, read-only: the relay may go on); the message says which
    operation failed and why, in one line."""

    def __init__(self, message: str, *, damaged: bool) -> None:
        super().__init__(message)
        self.damaged = damaged
