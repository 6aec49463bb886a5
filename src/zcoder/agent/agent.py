"""The agent: one conversation at a time, one turn at a time, each in its own cancel scope.

The interactive app and the one-shot mode both drive this class; the relay worker hands it
relayed turns. It owns what outlives a turn: the conversation (the session and the user's
``a`` grant, see ``parts.Conversation``), the model name and what it learnt per model, and
the sink. Each turn gets its frozen ``TurnParts``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from zcoder.agent.context import Calibration, Window
from zcoder.agent.context_report import context_report
from zcoder.agent.model import ChatChunk, ChatRequest, ClientWrapper, ModelClient
from zcoder.agent.parts import Conversation, TurnParts
from zcoder.agent.turns import OutcomeStatus, RelaySender, TurnOutcome, TurnRequest
from zcoder.agent.windows import Windows, measure_fill
from zcoder.approval.questions import Approver
from zcoder.checkpoint.records import TurnRecord
from zcoder.checkpoint.text import model_note, report_lines
from zcoder.checkpoint.tracker import Checkpoints, TurnCheckpoint, finish_shielded
from zcoder.config import Config
from zcoder.conversation import Message, TranscriptEvent
from zcoder.errors import CheckpointError, ModelError, SessionError
from zcoder.instructions import load_instructions
from zcoder.live import CommandsGranted, ContextFill, Entry, StateChange, TurnSink
from zcoder.session.data import SessionServer

if TYPE_CHECKING:
    from zcoder.agent.loop import Turn
    from zcoder.session.store import Session, SessionStore
    from zcoder.tools.registry import Toolbox

__all__ = ["Agent", "OutcomeStatus", "RelaySender", "TurnOutcome", "TurnRequest"]

_log = logging.getLogger(__name__)


class _Reach(ClientWrapper):
    """A ``ModelClient`` that notes whether a chat request got a response head: only
    then can the model have acted on the turn (a failure before it ran nothing).
    ``on_reach`` is called once, at the first response head."""

    def __init__(self, inner: ModelClient, on_reach: Callable[[], None] | None = None) -> None:
        super().__init__(inner)
        self._on_reach = on_reach
        self.reached = False

    @asynccontextmanager
    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        async with self._inner.stream_chat(request) as chunks:
            if not self.reached and self._on_reach is not None:
                self._on_reach()
            self.reached = True
            yield chunks


class Agent:
    def __init__(
        self,
        *,
        config: Config,
        client: ModelClient,
        toolbox: Toolbox,
        approver: Approver,
        store: SessionStore,
        session: Session,
        sink: TurnSink,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self._config = config
        self._checkpoints = checkpoints
        # The paths the last turn created, changed or deleted, as its checkpoint saw them;
        # None when no checkpoint could tell (off, failed, or no change was attempted).
        self.turn_changes: tuple[str, ...] | None = None
        self._client = client
        self._toolbox = toolbox
        self._approver = approver
        self._store = store
        self._conversation = Conversation(session)
        self._sink = sink
        self._model = session.model or config.model
        self._no_thinking: set[str] = set()  # models that refused think=true
        self._windows = Windows(config.context_window)  # the one owner of each window
        self._served: set[str] = set()  # models a chat request has reached (loaded now)
        self._calibrations: dict[str, Calibration] = {}
        self._fixed_estimate = 0  # the system prompt and tools of the last request, estimated
        self._scope: trio.CancelScope | None = None

    @property
    def session(self) -> Session:
        return self._conversation.session

    @property
    def model(self) -> str:
        return self._model

    @property
    def busy(self) -> bool:
        return self._scope is not None

    def set_model(self, name: str) -> None:
        """Use ``name`` from the next model call on, and record it in the session."""
        self._model = name
        self.session.model = name
        self._save(self.session)

    def switch_session(self, session: Session) -> None:
        """Continue another conversation; a command grant never carries over."""
        if self.busy:
            raise RuntimeError("cannot switch sessions while a turn runs")
        granted = self._conversation.commands_granted
        self._conversation = Conversation(session)
        self._model = session.model or self._model
        if granted:
            self._sink.emit(CommandsGranted(False))

    @property
    def toolbox(self) -> Toolbox:
        return self._toolbox

    def set_toolbox(self, toolbox: Toolbox) -> None:
        """Offer these tools from the next turn on (a running turn keeps its own)."""
        self._toolbox = toolbox

    def cancel_turn(self) -> bool:
        """Cancel the running turn (Escape); ``run_turn`` then returns ``cancelled``."""
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    async def warmup(self) -> None:
        """Load the model and fill the server's prompt cache with the next turn's prefix
        (system prompt, tool schemas, the history so far), asking for one output token.
        Nothing of it is stored in the session."""
        # The same window as the turns: another num_ctx would make Ollama load it again.
        await self._window()
        turn = self._turn(self._client, TurnRequest("user", "(warm-up)"))
        await turn.warm()
        self._served.add(self._model)
        self._keep(turn)

    async def _window(self) -> Window:
        """The window for the current model (``windows.Windows`` decides it)."""
        model = self._model
        return await self._windows.ask(self._client, model, served=model in self._served)

    async def run_turn(
        self, request: TurnRequest, *, on_reach: Callable[[], None] | None = None
    ) -> TurnOutcome:
        """Run one turn to its end. Model failures become an ``error`` outcome; a cancel
        from an outer scope propagates once the history is consistent and saved.

        A turn whose every model request failed before a response head (its outcome's
        ``reached_model`` is false) leaves no message in the history: the model never saw
        it, and only the user sends it again (a relayed task's retry must be the only copy
        the model sees). Its transcript entries stay: the user saw them. ``on_reach`` is
        called once, when the first model request of the turn gets its response head
        (never for a turn that did not reach)."""
        if self._scope is not None:
            return TurnOutcome("error", error="a turn is already running")
        reach = _Reach(self._client, on_reach)
        session = self.session
        checkpoint = self._turn_checkpoint(request)
        turn = self._turn(reach, request, checkpoint)
        self._scope = scope = trio.CancelScope()
        before = len(session.history)
        try:
            turn.begin()
            # The turn's own first message: a compaction may shorten what lies before it.
            task = session.history[before]
            await self._save_async(session)
            with scope:
                await self._window()  # asked of the server once per model
                outcome = await turn.run()
            if scope.cancelled_caught:
                outcome = turn.interrupt()
            # A request the server refused as too large for its window is final: it is
            # settled as failed, never retried as if the model were down.
            outcome = attrs.evolve(outcome, reached_model=reach.reached or turn.refused)
            if outcome.reached_model:
                self._served.add(self._model)
                # Where ``--resume`` reconnects: the server that answered in the session.
                gguf = str(self._config.gguf or "")  # a server of zcoder's own: its file
                session.server = SessionServer(self._config.host, self._config.api, gguf)
                session.agent_name = self._config.agent_name  # what peers know it by
            # A task refused at its first step (larger than the window) never ran: the
            # model must not find it in the history either.
            refused_alone = turn.refused and bool(session.history) and session.history[-1] is task
            unreached = outcome.status == "error" and not reach.reached
            if unreached or refused_alone:
                start = next(
                    (i for i, m in enumerate(session.history) if m is task), len(session.history)
                )
                del session.history[start:]
                turn.forget_refused()
        except BaseException:
            # An outer cancel, Ctrl-C or a bug: leave a history the next request can use.
            turn.interrupt()
            raise
        finally:
            self._scope = None
            self._keep(turn)
            await self._finish_checkpoint(checkpoint, turn)
            await self._save_async(session)  # shielded by the store: always done
        return outcome

    def _turn_checkpoint(self, request: TurnRequest) -> TurnCheckpoint | None:
        self.turn_changes = None
        if self._checkpoints is None or not self._checkpoints.enabled:
            return None
        s = request.sender
        sender = f"{s.project} (pid {s.pid})" if s is not None else ""
        return self._checkpoints.turn(self.session.id, request.origin, sender, request.text)

    async def _finish_checkpoint(self, checkpoint: TurnCheckpoint | None, turn: Turn) -> None:
        """The turn's end snapshot: what it changed (kept for ``/undo``)."""
        if checkpoint is None or not checkpoint.taken:
            return
        try:
            record = await finish_shielded(checkpoint)
        except CheckpointError as exc:
            turn.note_problem(f"The checkpoint at the end of this turn failed: {exc}.")
            return
        self.turn_changes = () if record is None else tuple(c.path for c in record.changes)

    async def undo(self, first: int | None) -> list[str]:
        """``/undo`` (``first`` None) or ``/rewind FIRST``: take back the session's turns
        and tell the model, in the next request, which files were restored; the lines
        to show. ``CheckpointError`` says why nothing was taken back."""
        if self._scope is not None:
            raise RuntimeError("cannot undo while a turn runs")
        if self._checkpoints is None:
            raise CheckpointError("checkpoints are off here: nothing to undo")
        report = await self._checkpoints.undo(self.session.id, first)
        lines = report_lines(report)
        self.session.history.append(Message(role="user", content=model_note(report)))
        self.session.events.extend(TranscriptEvent(role="system", text=x) for x in lines)
        await self._save_async(self.session)
        return lines

    def checkpoint_turns(self) -> list[TurnRecord]:
        """``/rewind``: this session's turns that changed files."""
        if self._checkpoints is None:
            raise CheckpointError("checkpoints are off here: no turn can be taken back")
        return self._checkpoints.records(self.session.id)

    async def compact(self, focus: str = "") -> bool:
        """``/compact [focus]``: summarise the history now (a cancel leaves it as it was);
        whether anything changed."""
        if self._scope is not None:
            raise RuntimeError("cannot compact while a turn runs")
        session = self.session
        turn = self._turn(self._client, TurnRequest("user", "(compact)"))
        self._scope = scope = trio.CancelScope()
        plan = None
        try:
            with scope:
                await self._window()
                plan = await turn.compact(force=True, focus=focus)
        except ModelError as exc:
            self._sink.emit(Entry(TranscriptEvent(role="error", text=turn.describe(exc))))
        finally:
            self._scope = None
            self._keep(turn)
            self._sink.emit(StateChange("stopped" if scope.cancelled_caught else "ready"))
        if scope.cancelled_caught:
            self._note("Compaction stopped; the history is unchanged.")
        elif plan is None and not turn.compaction_skipped:
            self._note("Nothing to compact: the history is already as small as it gets.")
        if plan is not None:
            await self._save_async(session)
        return plan is not None

    def context_fill(self) -> ContextFill | None:
        """How full the next request would make the window (None before any request)."""
        if not self._fixed_estimate:
            return None
        calibration = self._calibrations.setdefault(self._model, Calibration())
        window = self._windows.of(self._model)
        return measure_fill(self._fixed_estimate, self.session.history, calibration, window)

    async def context_lines(self) -> list[str]:
        """``/context``: the window and who set it, and what fills it."""
        turn = self._turn(self._client, TurnRequest("user", "(context)"))
        await self._window()
        return context_report(
            turn.steps.sizes(),
            turn.steps.fixed_estimate,
            self.session.history,
            self._client.kind.name,
            turn.rounds.tool_specs(),
        )

    def _note(self, text: str) -> None:
        self._sink.emit(Entry(TranscriptEvent(role="system", text=text)))

    def _turn(
        self, client: ModelClient, request: TurnRequest, checkpoint: TurnCheckpoint | None = None
    ) -> Turn:
        # The loop and what only it uses (compaction, the loop guard, printed tool calls)
        # are imported at the first turn or warm-up, after the manifest is published.
        from zcoder.agent.loop import Turn

        parts = TurnParts(
            config=self._config,
            client=client,
            toolbox=self._toolbox,
            approver=self._approver,
            sink=self._sink,
            conversation=self._conversation,
            model=lambda: self._model,
            windows=self._windows,
            calibration=self._calibrations.setdefault(self._model, Calibration()),
            before_change=checkpoint.before_change if checkpoint is not None else None,
        )
        instructions = load_instructions(self._config.home, self._config.workspace)
        think = self._config.think and self._model not in self._no_thinking
        return Turn(parts, request, instructions, think=think)

    def _keep(self, turn: Turn) -> None:
        """What the agent learns from a turn: a model's refusal to think. (A user's ``a``
        grant needs no keeping: the turn gave it to the conversation itself.)"""
        if self._config.think and not turn.think:
            self._no_thinking.add(self._model)
        self._fixed_estimate = turn.steps.fixed_estimate or self._fixed_estimate

    def _save(self, session: Session) -> None:
        # A failed save must not lose the turn's answer: say so and keep going; the next
        # save writes everything again.
        try:
            self._store.save(session)
        except SessionError as exc:
            self._not_saved(exc)

    async def _save_async(self, session: Session) -> None:
        """``_save`` with the disk work off the Trio thread (it serves the relay socket and
        the keyboard too)."""
        try:
            await self._store.save_async(session)
        except SessionError as exc:
            self._not_saved(exc)

    def _not_saved(self, exc: SessionError) -> None:
        event = TranscriptEvent(role="error", text=f"session not saved: {exc}")
        self._sink.emit(Entry(event))
