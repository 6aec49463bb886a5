"""The one exception tree of zcoder.

Foreign exceptions (httpx, OSError, cattrs) are translated once, at the boundary that
meets them; everything above sees only these. ``trio.Cancelled`` is never caught here.

    ZcoderError
    ├── ConfigError              a bad option or environment value (names it)
    ├── ModelError               talking to the model server failed
    │   ├── ServerUnavailable    cannot connect (after the one retry)
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
    └── RelayError               the inter-agent relay
        ├── RelayUnavailable     the relay cannot run here (reason says why)
        ├── UnsafeRelayDir       the shared relay directory is not safe to use
        ├── FrameError           a frame that violates the wire format
        └── RelayTransportError  a peer could not be reached or answered badly
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FrameError",
    "IncompleteStream",
    "MalformedStream",
    "ModelError",
    "ModelHTTPError",
    "RelayError",
    "RelayTransportError",
    "RelayUnavailable",
    "ServerUnavailable",
    "SessionCorrupt",
    "SessionError",
    "SessionLocked",
    "SessionNotFound",
    "StreamErrorLine",
    "StreamStalled",
    "ToolError",
    "UnsafeRelayDir",
    "WorkspaceError",
    "ZcoderError",
]


class ZcoderError(Exception):
    """Base of every error zcoder raises on purpose."""


class ConfigError(ZcoderError):
    """An option or environment value is invalid; the message names it and what is accepted."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


class ModelError(ZcoderError):
    """Talking to the model server failed.

    ``kind`` names the server the client that raised it speaks to ("Ollama", "llama.cpp",
    ...; empty when unknown), so that the one-line description names the right fix.
    """

    kind: str = ""


class ServerUnavailable(ModelError):
    """The server could not be reached; ``reason`` is the low-level cause, if known."""

    def __init__(self, message: str, *, reason: str = "", kind: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.kind = kind


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
        kind: str = "",
        model_missing: bool = False,
        speaks_openai: bool = False,
    ) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.server_message = message
        self.kind = kind
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
