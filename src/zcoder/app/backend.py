"""The UI's ``Backend`` and the worker's ``WorkBackend`` over the agent, the session store
and the model client.

Part of the app wiring (floor 5): it knows the agent and answers the UI in the UI's terms
(one-line problems as ``ZcoderError``, ``SessionRow``). The relay's claims are here too.
Made once, with the approver and the sink the agent reports to (no later attaching).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from zcoder.agent.agent import Agent, RelaySender, TurnRequest
from zcoder.agent.model import ModelClient
from zcoder.agent.rounds import describe_model_error
from zcoder.agent.servers import missing_model_fix
from zcoder.app.inbox import INBOX_ACTIONS, Inbox, ReceiptSink
from zcoder.app.receipts import ChangeRecorder, final_state
from zcoder.app.relay import RelayLink
from zcoder.app.relay_labels import SendLabels
from zcoder.app.relay_send import PeerRefresh, send_command
from zcoder.app.relay_sent import cancel_sent, close_intake, farewell
from zcoder.app.relay_unrun import sender_label
from zcoder.app.worker import RelayTurn
from zcoder.approval.questions import Approver
from zcoder.config import Config
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, ModelError, SessionError, ZcoderError
from zcoder.live import Entry, LiveEvent, ToolUpdate, TurnSink
from zcoder.relay.spool import Claimed
from zcoder.relay.targets import target_completions
from zcoder.session.store import Session, SessionStore, SessionSummary
from zcoder.text.flat import one_line
from zcoder.tools.base import Tool
from zcoder.tools.registry import Toolbox, core_tools
from zcoder.tools.relay_tools import SEND_AGENT_MESSAGE
from zcoder.ui.agents_text import agents_lines
from zcoder.ui.backend import SessionRow, Unrun

__all__ = ["AgentBackend"]

_log = logging.getLogger(__name__)
_CHECK_SECONDS = 5.0
_INBOX_HELP = [
    "/agents hold    hold every new relayed message for you; /agents accept undoes it",
    "/agents inbox   list waiting messages; /agents approve N runs one, /agents deny N drops it",
    "/agents sent    the messages you sent and what their receivers reported; "
    "/agents cancel N withdraws one still queued",
]


class _SendCardLabels:
    """Names a send's target like its question does (project and pid, not a bare id), on
    its card and its transcript entry; and shows a failed send as ``undelivered``: a send
    fails exactly when no receiver stored the message (refused by it, unanswered, or
    refused before the question), so its card says ``not delivered``."""

    def __init__(self, inner: TurnSink, label: Callable[[str], str] = str) -> None:
        self._inner = inner
        self._label = label

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, ToolUpdate) and event.name == SEND_AGENT_MESSAGE:
            state = "undelivered" if event.state == "failed" else event.state
            event = attrs.evolve(event, target=self._label(event.target), state=state)
        elif isinstance(event, Entry) and event.event.meta.get("name") == SEND_AGENT_MESSAGE:
            # The same label as the card's, so the view knows this card is already shown.
            meta = {**event.event.meta, "target": self._label(event.event.meta.get("target", ""))}
            event = Entry(as_shown(attrs.evolve(event.event, meta=meta)))
        self._inner.emit(event)


def as_shown(event: TranscriptEvent) -> TranscriptEvent:
    """A saved transcript event as the screen shows it: a send that failed was not
    delivered (nothing was stored), also when a resumed session draws it again."""
    meta = event.meta
    if meta.get("name") == SEND_AGENT_MESSAGE and meta.get("state") == "failed":
        return attrs.evolve(event, meta={**meta, "state": "undelivered"})
    return event


def _installed(name: str, models: list[str]) -> bool:
    return name in models or (":" not in name and f"{name}:latest" in models)


def _row(summary: SessionSummary, current: str) -> SessionRow:
    return SessionRow(summary, summary.id == current)


def _current_row(s: Session) -> SessionRow:
    return SessionRow(SessionSummary.of(s), current=True)


class AgentBackend:
    """The UI's ``Backend`` and the worker's ``WorkBackend``."""

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
        receipts: ReceiptSink | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._client = client
        self._session = session
        self._core_tools = core_tools()
        self._toolbox = Toolbox(self._core_tools)
        self.relay = RelayLink(config, runtime_dir, self._offer_relay_tools)
        self.peer_refresh = PeerRefresh(self.relay.discover)
        # Which waiting messages wait for the user (the inbound policy, the exchange bound).
        self.inbox = Inbox(
            config.relay.inbound, receipts if receipts is not None else self.relay.receipts
        )
        self.relay.on_sent = self.inbox.exchanges.add
        self._sink = sink
        self._changes = ChangeRecorder(_SendCardLabels(sink, self.relay.card_label))
        # A relayed turn could not reach the model: relayed messages wait (local prompts
        # still run) until the model answers again.
        self._model_down = False
        self.models: list[str] = []
        self.session_ids: list[str] = []
        self._agent = Agent(
            config=config,
            client=client,
            toolbox=self._toolbox,
            approver=SendLabels(approver, self.relay),
            store=store,
            session=session,
            sink=self._changes,
        )
        if self._agent.model != config.model and not config.resume:
            self._agent.set_model(config.model)

    def _offer_relay_tools(self, extra: Sequence[Tool]) -> None:
        """The core tools, plus the relay tools exactly while the relay is available."""
        tools = [*self._core_tools, *extra]
        if self._toolbox.names() != [tool.spec.name for tool in tools]:
            self._toolbox = Toolbox(tools)
            self._agent.set_toolbox(self._toolbox)

    @property
    def agent(self) -> Agent:
        return self._agent

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
        return [as_shown(e) for e in self._session.events]

    async def run_turn(self, text: str) -> str:
        self.inbox.exchanges.local_turn()  # the user is in the loop again
        self.relay.refresh(state="busy")
        try:
            outcome = await self.agent.run_turn(TurnRequest("user", text))
        finally:
            self.relay.refresh(state="ready")
        if outcome.reached_model:
            self._model_down = False
        return outcome.status

    def cancel_turn(self) -> bool:
        return self.agent.cancel_turn()

    async def compact(self, focus: str) -> bool:
        """``/compact [focus]``, run by the worker like a turn (Escape cancels it)."""
        self.relay.refresh(state="busy")
        try:
            return await self.agent.compact(focus)
        finally:
            self.relay.refresh(state="ready")

    def context_percent(self) -> int | None:
        fill = self.agent.context_fill()
        return None if fill is None else fill.percent

    async def context_lines(self) -> list[str]:
        return await self.agent.context_lines()

    def _describe(self, exc: ModelError) -> str:
        return describe_model_error(exc, self._config.host, self.model)

    async def check_model(self) -> str:
        try:
            self.models = await self.list_models()
        except ZcoderError as exc:
            return str(exc)
        kind = self._client.kind
        # llama.cpp answers with the model it was started with, whatever name is asked.
        if _installed(self.model, self.models) or kind == "llama.cpp":
            self._model_down = False
            return ""
        if kind == "Ollama":
            return (
                f"model '{self.model}' is not installed on {self._config.host}: run "
                f"`ollama pull {self.model}`, or pick one with /model"
            )
        return (
            f"model '{self.model}' is not served by {kind} at {self._config.host}: "
            f"{missing_model_fix(kind, self.model)}"
        )

    async def warmup(self) -> str:
        try:
            await self.agent.warmup()
        except ModelError as exc:
            return self._describe(exc)
        self._model_down = False
        return ""

    async def list_models(self) -> list[str]:
        try:
            with trio.fail_after(_CHECK_SECONDS):
                models = [m.name for m in await self._client.list_models()]
        except trio.TooSlowError:
            raise CommandError(
                f"{self._client.kind} at {self._config.host} did not answer in time"
            ) from None
        except ModelError as exc:
            raise CommandError(self._describe(exc)) from None
        self.models = sorted(models)
        return self.models

    def served_name(self, name: str, models: list[str]) -> str:
        if name in models:
            return name
        if ":" not in name and f"{name}:latest" in models:
            return f"{name}:latest"  # Ollama's own reading of a bare name
        shown = one_line(name)
        kind = self._client.kind
        if kind == "Ollama":
            fix = f"run `ollama pull {shown}`, or pick one from /model"
        else:
            fix = missing_model_fix(kind, shown)
        raise CommandError(f"model {shown!r} is not served by {kind}: {fix}")

    def set_model(self, name: str) -> None:
        self.agent.set_model(name)
        self.relay.refresh(model=name)
        self._model_down = False  # another model: worth trying the waiting messages

    def _leave(self, new: Session) -> None:
        old = self.agent.session
        if old.history:
            self._save(old)
        self.agent.switch_session(new)
        self._store.release(old)
        self.relay.refresh(session_id=new.id, model=self.model)

    def new_session(self) -> None:
        self._leave(self._store.create(self.model))

    async def list_sessions(self) -> list[SessionRow]:
        current = self.agent.session
        # Reading every session file is disk work: off the thread that serves the relay.
        rows = [_row(r, current.id) for r in await trio.to_thread.run_sync(self._store.list)]
        if not any(r.current for r in rows):
            rows.insert(0, _current_row(current))
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

    async def wait_relay_change(self) -> None:
        """Return once the relay changed (the worker then calls ``sync_relay``)."""
        await self.relay.wait_for_change()

    def sync_relay(self) -> None:
        """Offer the relay tools as the relay now allows; show its new problem lines and
        record the receipts that arrived (the listener only queued them)."""
        for line in self.relay.sync():
            self._show(TranscriptEvent(role="error", text=line))
        for event in self.relay.outbox.take_entries():
            self._record_entry(event)
        self._observe_inbox()

    def _observe_inbox(self) -> None:
        """Mark the newly waiting messages held or not; show each new hold once."""
        for notice in self.inbox.observe(self.relay.inbox()):
            self._show(TranscriptEvent(role="system", text=notice))

    def relay_waiting(self) -> bool:
        if not self.relay.waiting() or self._model_down:
            return False
        self._observe_inbox()  # a message stored since the last sync is decided first
        return self.inbox.runnable()

    def relay_waits_for_model(self) -> bool:
        return self._model_down and self.relay.status()[1] > 0

    def relay_unrun(self) -> list[Unrun]:
        return self.relay.unrun()

    async def run_relay_turn(self) -> bool:
        """Claim and run one relayed message; ``False`` when none could be claimed."""
        turn = self.claim_relay()
        return turn is not None and await turn.run()

    def claim_relay(self) -> RelayTurn | None:
        """Claim the oldest waiting relayed message (showing the quarantine reports); the
        turn to run it, or ``None`` when another claimer was faster or the claim failed."""
        self._observe_inbox()
        claimed, problems = self.relay.claim(self.inbox.skip())
        for problem in problems:  # shown, never given to the model
            self._show(TranscriptEvent(role="error", text=problem))
        if claimed is None:
            return None
        return RelayTurn(claimed.envelope.sender_project, functools.partial(self._run, claimed))

    async def _run(self, claimed: Claimed) -> bool:
        """Run a claimed message. It is settled (at most once) when its turn reached the
        model, whatever the outcome; when it never did (server unreachable, model missing),
        nothing of it ran: it goes back first in the queue and waits for the model
        (``relay_waits_for_model``)."""
        self.relay.refresh(state="busy")
        self.inbox.exchanges.add(claimed.envelope.sender_instance_id)
        unreached = reached = False
        self._changes.start()

        def started() -> None:  # only a turn that reached the model has started the message
            self.relay.receipts.send(claimed.envelope, "started")

        try:
            request = TurnRequest("relay", *_sender(claimed))
            outcome = await self.agent.run_turn(request, on_reach=started)
            if not (outcome.status == "error" and not outcome.reached_model):
                state, detail = final_state(outcome)
                changed = self._changes.changed()
                self.relay.receipts.send(claimed.envelope, state, detail, changed)
            _log.debug("relayed turn %s ended: %s", claimed.envelope.message_id, outcome.status)
            reached = outcome.reached_model
            unreached = outcome.status == "error" and not reached
        finally:
            settle = self.relay.release if unreached else self.relay.complete
            problem = settle(claimed)
            self.relay.refresh(state="ready")
            if problem:
                self._show(TranscriptEvent(role="error", text=problem))
        if unreached and not problem:
            self._model_down = True
            self._show(
                TranscriptEvent(
                    role="system",
                    text=f"The relayed message from {sender_label(claimed.envelope)} did not "
                    "reach the model: it stays first in the queue and runs when the model "
                    "answers again.",
                )
            )
        elif reached:
            self._model_down = False
        return True

    def relay_status(self) -> tuple[str, int]:
        return self.relay.status()

    async def list_agents(self) -> list[str]:
        return await self.relay.list_lines()

    def relay_control(self, action: str) -> list[str]:
        """``/agents`` and its actions; the lines to show."""
        verb, _, arg = action.partition(" ")
        if verb in INBOX_ACTIONS:
            return self._inbox_control(verb, arg.strip())
        lines = agents_lines(action, self.relay.control(action))
        return [*lines, *_INBOX_HELP] if not action and len(lines) > 1 else lines

    def _inbox_control(self, verb: str, arg: str) -> list[str]:
        if verb in ("hold", "accept", "inbox") and arg:
            raise CommandError(f"/agents {verb} takes no argument")
        self._observe_inbox()
        if verb == "inbox":
            return self.inbox.lines()
        if verb in ("hold", "accept"):
            return self.inbox.set_mode(verb)
        if verb == "approve":
            return self.inbox.approve(arg)
        number, waiting = self.inbox.deny(arg)
        if not self.relay.discard(waiting.message_id):
            raise CommandError(f"relayed message {number} could not be removed: it no longer waits")
        return self.inbox.denied(number, waiting)

    async def send_message(self, args: str) -> None:
        """``/send TARGET TEXT``: deliver it now (no turn) and show and keep its card."""
        event = await send_command(self.relay, args)
        self.agent.session.events.append(event)
        self._show(event)

    def send_targets(self) -> list[str]:
        """What Tab offers after ``/send ``: from the last discovery, no I/O."""
        return target_completions(self.relay.known_peers())

    def relay_sent(self) -> list[str]:
        """``/agents sent``: the messages this instance sent, with their latest state."""
        return self.relay.outbox.sent_lines()

    async def relay_cancel(self, ref: str) -> str:
        """``/agents cancel REF``: withdraw a message this instance sent; the line to show."""
        return await cancel_sent(self.relay, ref)

    def relay_close_intake(self) -> None:
        """On the way out, first: accept and claim no more relayed messages."""
        close_intake(self.relay)

    async def relay_farewell(self) -> bool:
        """On the way out, before the relay shuts down: ``dropped`` to the senders of the
        messages that will not run (bounded); ``False`` when they could not be told."""
        return await farewell(self.relay)

    def _record_entry(self, event: TranscriptEvent) -> None:
        """A relay entry that is part of the session (a receipt): persisted and shown."""
        self.agent.session.events.append(event)
        self._show(event)

    def _show(self, event: TranscriptEvent) -> None:
        self._sink.emit(Entry(event))

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


def _sender(claimed: Claimed) -> tuple[str, RelaySender]:
    e = claimed.envelope
    sender = RelaySender(
        instance_id=e.sender_instance_id,
        pid=e.sender_pid,
        project=e.sender_project,
        workspace=e.sender_workspace,
        verified=claimed.verified,
    )
    return e.body, sender
