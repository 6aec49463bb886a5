"""What the UI needs from the rest of zcoder, as a protocol: the status bar's queries and
what the slash commands do. Running turns is the worker's (``app/worker.py``), not the UI's.

``ui/`` never imports ``agent/``: ``app.py`` implements this over the agent, the session
store, the model client and the relay service. Failures the user should read arrive as
``ZcoderError`` whose message is one finished line (what failed and what to do).
"""

from __future__ import annotations

from typing import Protocol

import attrs

from zcoder.conversation import TranscriptEvent
from zcoder.session.data import SessionSummary

__all__ = ["Backend", "McpView", "RelayView", "SessionRow", "Unrun"]


@attrs.frozen
class SessionRow:
    """One saved session, as ``/sessions`` lists it: the store's summary of it, and whether
    it is the session open here. Its fields read through to the summary."""

    summary: SessionSummary
    current: bool = False

    @property
    def id(self) -> str:
        return self.summary.id

    @property
    def title(self) -> str:
        return self.summary.title

    @property
    def model(self) -> str:
        return self.summary.model

    @property
    def updated_at(self) -> float:
        return self.summary.updated_at

    @property
    def messages(self) -> int:
        return self.summary.messages

    @property
    def problem(self) -> str:
        return self.summary.problem


@attrs.frozen
class Unrun:
    """An accepted relayed message that has not finished (leaving would stop it when it is
    ``running``, else drop it), as sent: ``sender`` like ``alpha (pid 123)``, ``task`` its
    text (raw: escape before showing)."""

    message_id: str
    sender: str
    task: str
    running: bool = False


class McpView(Protocol):
    def lines(self) -> list[str]:
        """``/mcp``: each configured MCP server, its state, and its tools."""
        ...


class RelayView(Protocol):
    """What the UI reads of the accepted relayed messages; queries, they change nothing
    (what changes what runs goes to the worker: ``RelayControl``)."""

    def status(self) -> tuple[str, int]:
        """``(state, waiting)`` for the status bar: ``on``, ``paused``, ``off`` or
        ``unavailable`` (``""`` hides it), and the accepted messages not yet started."""
        ...

    def waits_for_model(self) -> bool:
        """Relayed messages wait because their turn could not reach the model; they run
        once the model answers again (a check or warm-up that succeeds, a turn that
        reaches it). Until then none is claimed and local prompts still run."""
        ...

    def unrun(self) -> list[Unrun]:
        """The accepted relayed messages that have not finished: the running one first,
        then those waiting, oldest first."""
        ...

    def query(self, action: str) -> list[str]:
        """``/agents`` (the state and help), ``/agents inbox``, ``/agents show N``."""
        ...


class Backend(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def session_title(self) -> str: ...

    async def list_models(self) -> list[str]: ...

    def served_name(self, name: str, models: list[str]) -> str:
        """The name of ``models`` that ``name`` means (``llama3`` is ``llama3:latest``), or a
        ``ZcoderError`` saying how to get it onto this kind of server."""
        ...

    def set_model(self, name: str) -> None: ...

    def new_session(self) -> None: ...

    async def list_sessions(self) -> list[SessionRow]: ...

    def switch_session(self, session_id: str) -> list[TranscriptEvent]:
        """Switch to that session and return its transcript (to show again)."""
        ...

    async def compact(self, focus: str) -> bool:
        """``/compact [focus]``: summarise the older history now; whether it changed."""
        ...

    async def undo(self, first: int | None) -> list[str]:
        """``/undo`` (``first`` None: the last turn that changed files) or ``/rewind
        FIRST`` (that turn and every later one): the lines saying what was restored and
        what was kept; ``ZcoderError`` when nothing was taken back."""
        ...

    def rewind_lines(self) -> list[str]:
        """``/rewind``: this session's turns that changed files, one line each."""
        ...

    def context_percent(self) -> int | None:
        """How full the next request would make the context window, in percent; None
        before anything was measured (no turn or warm-up yet)."""
        ...

    async def context_lines(self) -> list[str]:
        """``/context``: the window, who set it, and what fills it."""
        ...

    @property
    def mcp(self) -> McpView:
        """The configured MCP servers, as ``/mcp`` shows them."""
        ...

    @property
    def inbox(self) -> RelayView:
        """The accepted relayed messages, as the UI reads them (queries only)."""
        ...

    async def list_agents(self) -> list[str]:
        """``/list-agents``: the peer table's lines, or the one no-peers sentence; a
        ``ZcoderError`` saying why when the relay is off or unavailable."""
        ...

    def relay_sent(self) -> list[str]:
        """``/agents sent``: the messages this instance sent, latest state and age."""
        ...

    async def relay_cancel(self, ref: str) -> str:
        """``/agents cancel REF``: withdraw a message this instance sent (by id or its
        number in ``/agents sent``); the line to show, or ``ZcoderError``."""
        ...

    async def send_message(self, args: str) -> None:
        """``/send TARGET TEXT``: deliver the text now, with no turn and no question, and
        show its card; a ``ZcoderError`` saying why when nothing was sent."""
        ...
