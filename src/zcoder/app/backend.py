"""The UI's ``Backend`` over the agent, the session store, the model server and the
relay; it makes the worker's ``TurnRunner`` (``runner``) over the same agent.

Part of the app wiring (floor 5): it knows the agent and answers the UI in the UI's terms
(one-line problems as ``ZcoderError``, ``SessionRow``). Sessions and model switching are
here (a session brings its own sent list: ``RelayOutbox.open_session``); the turns (user
and relayed) are the runner's. The relay is three objects, one per job: ``relay``
(``RelayLink``, the edge that reaches the service and the spool), ``sends`` (what this
instance sends) and ``inbox`` (``RelayInbox``, the worker's feeder of the inbound machine,
which owns every relayed message's state). Made once, with the approver and the sink the
agent reports to (no later attaching).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from zcoder.agent.agent import Agent
from zcoder.agent.model import ModelClient
from zcoder.app.relay.asking import ExpiringQuestions
from zcoder.app.relay.inbox import RelayInbox
from zcoder.app.relay.labels import SendLabels
from zcoder.app.relay.link import RelayLink
from zcoder.app.relay.receipts import ChangeRecorder
from zcoder.app.relay.send import SEND_CARD, PeerRefresh, send_command
from zcoder.app.relay.sends import Sends
from zcoder.app.relay.sent import cancel_sent, farewell, sent_lines, watch_receivers
from zcoder.app.runner import TurnRunner
from zcoder.app.server import ModelServer
from zcoder.approval.questions import Approver
from zcoder.checkpoint.text import turn_lines
from zcoder.checkpoint.tracker import Checkpoints
from zcoder.config import Config
from zcoder.conversation import TranscriptEvent
from zcoder.errors import SessionError
from zcoder.live import Entry, LiveEvent, ToolState, ToolUpdate, TurnSink
from zcoder.mcp.link import McpLink
from zcoder.relay.targets import target_completions, target_descriptions
from zcoder.session.store import Session, SessionStore, SessionSummary
from zcoder.tools.base import Tool
from zcoder.tools.registry import Toolbox, core_tools
from zcoder.tools.relay_tools import SEND_AGENT_MESSAGE
from zcoder.ui.backend import SessionRow

__all__ = ["AgentBackend"]

_log = logging.getLogger(__name__)
# A send card's states as the screen names them: what became of the delivery.
_DELIVERY: dict[str, ToolState] = {"completed": "delivered", "failed": "undelivered"}


class _SendCardLabels:
    """Names a send's target like its question does (project and pid, not a bare id), on
    its card and its transcript entry; and says what became of the delivery, never of the
    task (``completed`` is a receipt's word): a send succeeds exactly when its receiver
    stored the message (``delivered``) and fails exactly when no receiver stored it
    (refused by it, unanswered, or refused before the question), so its card says ``not
    delivered``."""

    def __init__(self, inner: TurnSink, label: Callable[[str], str] = str) -> None:
        self._inner = inner
        self._label = label

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, ToolUpdate) and event.name == SEND_AGENT_MESSAGE:
            state = _DELIVERY.get(event.state, event.state)
            event = attrs.evolve(event, target=self._label(event.target), state=state)
        elif isinstance(event, Entry) and event.event.meta.get("name") == SEND_AGENT_MESSAGE:
            # The same label as the card's, so the view knows this card is already shown.
            meta = {**event.event.meta, "target": self._label(event.event.meta.get("target", ""))}
            event = Entry(as_shown(attrs.evolve(event.event, meta=meta)))
        self._inner.emit(event)


def as_shown(event: TranscriptEvent) -> TranscriptEvent:
    """A saved transcript event as the screen shows it: a send that failed was not
    delivered (nothing was stored), one that succeeded was delivered (what the receiver did
    with it is for its receipts to say), also when a resumed session draws it again."""
    meta = event.meta
    state = meta.get("state", "")
    if meta.get("name") in (SEND_AGENT_MESSAGE, SEND_CARD) and state in _DELIVERY:
        return attrs.evolve(event, meta={**meta, "state": _DELIVERY[state]})
    return event


# How many one-shot runs /sessions lists, the newest (--resume ID opens any).
ONESHOT_ROWS = 3


def _row(summary: SessionSummary, current: str) -> SessionRow:
    return SessionRow(summary, summary.id == current)


def _current_row(s: Session) -> SessionRow:
    return SessionRow(SessionSummary.of(s), current=True)


class AgentBackend:
    """The UI's ``Backend``; ``runner`` is the worker's ``WorkBackend``."""

    def __init__(
        self,
        config: Config,
        store: SessionStore,
        session: Session,
        client: ModelClient,
        runtime_dir: Path | None = None,
        *,
        approver: Approver,
        sink: TurnSink,
        relay: RelayLink | None = None,
    ) -> None:
        self._config = config
        self._store = store
        session.oneshot = False  # opened in the app: /sessions lists it with the app's
        self._core_tools = core_tools()
        self._toolbox = Toolbox(self._core_tools)
        self._relay_tools: list[Tool] = []
        self._mcp_tools: list[Tool] = []
        self.mcp = McpLink(config.home, config.workspace, self.offer_mcp_tools)
        # Made by the app before the model server check (``app.main``), else here.
        self.relay = relay if relay is not None else RelayLink(config, runtime_dir)
        self.sends = Sends(self.relay)
        self.inbox = RelayInbox(self.relay, self.sends)
        # The sent list is the session's: a resumed one's is rebuilt from its transcript.
        self.sends.outbox.open_session(session.id, session.events)
        self.peer_refresh = PeerRefresh(self.sends.discover)
        self._sink = sink
        changes = ChangeRecorder(_SendCardLabels(sink, self.sends.card_label))
        self.session_ids: list[str] = []
        self.agent = Agent(
            config=config,
            client=client,
            toolbox=self._toolbox,
            approver=SendLabels(
                ExpiringQuestions(approver, self.inbox, config.relay.question_timeout), self.sends
            ),
            store=store,
            session=session,
            sink=changes,
            checkpoints=Checkpoints(config.home, config.workspace, config.checkpoints),
        )
        if self.agent.model != config.model and not config.resume:
            self.agent.set_model(config.model)
        self.server = ModelServer(config, client, lambda: self.agent.model)
        self.runner = TurnRunner(
            self.agent,
            self.relay,
            self.inbox,
            self.server,
            sink,
            changes,
            self._offer_relay_tools,
            self.sends.tools,
        )

    def _offer_relay_tools(self, extra: Sequence[Tool]) -> None:
        """The core tools, plus the relay tools exactly while the relay is available."""
        self._relay_tools = list(extra)
        self._set_tools()

    def offer_mcp_tools(self, tools: Sequence[Tool]) -> None:
        """The MCP servers' tools, as they are while their servers run (``McpLink``)."""
        self._mcp_tools = list(tools)
        self._set_tools()

    def _set_tools(self) -> None:
        tools = [*self._core_tools, *self._relay_tools, *self._mcp_tools]
        if self._toolbox.names() != [tool.spec.name for tool in tools]:
            self._toolbox = Toolbox(tools)
            self.agent.set_toolbox(self._toolbox)

    @property
    def model(self) -> str:
        return self.agent.model

    @property
    def session_id(self) -> str:
        return self.agent.session.id

    @property
    def session_title(self) -> str:
        return self.agent.session.title

    def session_events(self) -> list[TranscriptEvent]:
        return [as_shown(e) for e in self.agent.session.events]

    async def compact(self, focus: str) -> bool:
        """``/compact [focus]``, run by the worker like a turn (Escape cancels it)."""
        return await self.agent.compact(focus)

    async def undo(self, first: int | None) -> list[str]:
        """``/undo`` and ``/rewind N``, run by the worker between turns."""
        return await self.agent.undo(first)

    def rewind_lines(self) -> list[str]:
        return turn_lines(self.agent.checkpoint_turns(), time.time())

    def context_percent(self) -> int | None:
        fill = self.agent.context_fill()
        return None if fill is None else fill.percent

    async def context_lines(self) -> list[str]:
        return await self.agent.context_lines()

    async def list_models(self) -> list[str]:
        return await self.server.list_models()

    def served_name(self, name: str, models: list[str]) -> str:
        return self.server.served_name(name, models)

    def set_model(self, name: str) -> None:
        self.agent.set_model(name)
        self.relay.refresh(model=name)
        self.inbox.model_answered()  # another model: worth trying the waiting ones

    def _leave(self, new: Session) -> None:
        new.oneshot = False  # opened in the app: /sessions lists it with the app's
        old = self.agent.session
        if old.history:
            self._save(old)
        self.agent.switch_session(new)
        self.sends.outbox.open_session(new.id, new.events)
        self._store.release(old)
        self.relay.refresh(session_id=new.id, model=self.model)

    def new_session(self) -> None:
        self._leave(self._store.create(self.model))

    async def list_sessions(self) -> list[SessionRow]:
        """The app's sessions, newest first, then the newest few one-shot runs (scripts
        that run ``zcoder -p`` in a loop would otherwise fill the list)."""
        current = self.agent.session
        # Reading every session file is disk work: off the thread that serves the relay.
        found = [_row(r, current.id) for r in await trio.to_thread.run_sync(self._store.list)]
        if not any(r.current for r in found):
            found.insert(0, _current_row(current))
        oneshots = [r for r in found if r.summary.oneshot and not r.current]
        apps = [r for r in found if not r.summary.oneshot or r.current]
        rows = apps + oneshots[:ONESHOT_ROWS]
        self.session_ids = [r.id for r in rows]
        return rows

    def switch_session(self, session_id: str) -> list[TranscriptEvent]:
        session = self._store.open(session_id)
        try:
            self._leave(session)
        except BaseException:
            self._store.release(session)
            raise
        return [as_shown(e) for e in session.events]

    # -- the relay ----------------------------------------------------------------------
    async def start_relay(self, root: trio.Nursery) -> str:
        """Start the relay in ``root`` (it is optional); ``""`` or why it is unavailable."""
        return await self.relay.start(root, model=self.model, session_id=self.session_id)

    async def list_agents(self) -> list[str]:
        return await self.sends.list_lines()

    async def send_message(self, args: str) -> None:
        """``/send TARGET TEXT``: deliver it now (no turn) and show and keep its card."""
        event = await send_command(self.sends, args)
        self.agent.session.events.append(event)
        self._sink.emit(Entry(event))

    def send_targets(self) -> list[str]:
        """What Tab offers after ``/send ``: from the last discovery, no I/O."""
        return target_completions(self.sends.known_peers())

    def send_target_descriptions(self) -> dict[str, str]:
        """What the Tab menu shows beside each target (label, pid, workspace): from the
        last discovery, no I/O."""
        return target_descriptions(self.sends.known_peers())

    async def watch_receivers(self) -> None:
        """Forever: tell of a receiver that left holding a message of ours unreported."""
        await watch_receivers(self.relay, self.sends)

    def relay_sent(self) -> list[str]:
        """``/agents sent``: the messages sent in this session, with their latest state."""
        return sent_lines(self.relay, self.sends)

    async def relay_cancel(self, ref: str) -> str:
        """``/agents cancel REF``: withdraw a message this instance sent; the line to show
        (its entry, when the receiver withdrew it, is kept and shown)."""
        line = await cancel_sent(self.relay, self.sends, ref)
        self.runner.show_entries()
        return line

    async def relay_farewell(self) -> bool:
        """On the way out, before the relay shuts down: ``dropped`` to the senders of the
        messages that will not run (bounded); ``False`` when they could not be told."""
        return await farewell(self.relay, self.inbox)

    def _save(self, session: Session) -> bool:
        try:
            self._store.save(session)
        except SessionError as exc:
            _log.error("session %s not saved: %s", session.id, exc)
            return False
        return True

    def close(self) -> tuple[str, bool]:
        """Save (when there is anything to keep) and release; ``(id, saved)``."""
        session = self.agent.session
        # No file (no model ever answered in it): nothing to resume, so no hint.
        saved = bool(session.history) and self._save(session) and self._store.is_saved(session.id)
        self._store.release(session)
        return session.id, saved
