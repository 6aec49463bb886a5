"""The agent: one conversation at a time, one turn at a time, each in its own cancel scope.

The interactive app and the one-shot mode both drive this class; the relay worker hands it
relayed turns. It owns what outlives a turn: the session, the model name, the sink and the
conversation-wide command grant (the user's ``a``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zcoder.agent.loop import Turn, context_size
from zcoder.agent.model import ChatRequest, ModelClient
from zcoder.agent.rounds import TurnParts
from zcoder.agent.turns import OutcomeStatus, RelaySender, TurnOutcome, TurnRequest
from zcoder.approval import Approver
from zcoder.config import Config
from zcoder.conversation import TranscriptEvent
from zcoder.errors import SessionError
from zcoder.instructions import load_instructions
from zcoder.live import Entry, TurnSink

if TYPE_CHECKING:
    from zcoder.session import Session, SessionStore
    from zcoder.tools.registry import Toolbox

__all__ = ["Agent", "OutcomeStatus", "RelaySender", "TurnOutcome", "TurnRequest"]


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
    ) -> None:
        self._config = config
        self._client = client
        self._toolbox = toolbox
        self._approver = approver
        self._store = store
        self._session = session
        self._sink = sink
        self._model = session.model or config.model
        self._granted = False
        self._no_thinking: set[str] = set()  # models that refused think=true
        self._scope: trio.CancelScope | None = None

    @property
    def session(self) -> Session:
        return self._session

    @property
    def model(self) -> str:
        return self._model

    @property
    def busy(self) -> bool:
        return self._scope is not None

    def set_model(self, name: str) -> None:
        """Use ``name`` from the next model call on, and record it in the session."""
        self._model = name
        self._session.model = name
        self._save(self._session)

    def switch_session(self, session: Session) -> None:
        """Continue another conversation; a command grant never carries over."""
        if self.busy:
            raise RuntimeError("cannot switch sessions while a turn runs")
        self._session = session
        self._model = session.model or self._model
        self._granted = False

    def set_sink(self, sink: TurnSink) -> None:
        self._sink = sink

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
        """Load the model with a disposable request; nothing of it is kept."""
        # The same num_ctx as the turns: another value would make Ollama load the model again.
        num_ctx = context_size(self._config.context_window)
        request = ChatRequest(
            model=self._model, messages=(), think=False, num_ctx=num_ctx, num_predict=1
        )
        async with self._client.stream_chat(request) as chunks:
            async for _ in chunks:
                pass

    async def run_turn(self, request: TurnRequest) -> TurnOutcome:
        """Run one turn to its end. Model failures become an ``error`` outcome; a cancel
        from an outer scope propagates once the history is consistent and saved."""
        if self._scope is not None:
            return TurnOutcome("error", error="a turn is already running")
        parts = self._turn_parts()
        turn = Turn(parts, request, load_instructions(self._config.home, self._config.workspace))
        self._scope = scope = trio.CancelScope()
        try:
            turn.begin()
            await self._save_async(parts.session)
            with scope:
                outcome = await turn.run()
            if scope.cancelled_caught:
                outcome = turn.interrupt()
        except BaseException:
            # An outer cancel, Ctrl-C or a bug: leave a history the next request can use.
            turn.interrupt()
            raise
        finally:
            self._scope = None
            self._keep(parts, request)
            await self._save_async(parts.session)  # shielded by the store: always done
        return outcome

    def _turn_parts(self) -> TurnParts:
        return TurnParts(
            config=self._config,
            client=self._client,
            toolbox=self._toolbox,
            approver=self._approver,
            sink=self._sink,
            session=self._session,
            model=lambda: self._model,
            granted=self._granted,
            think=self._config.think and self._model not in self._no_thinking,
        )

    def _keep(self, parts: TurnParts, request: TurnRequest) -> None:
        """What outlives the turn: a user's ``a`` grant, and a model's refusal to think."""
        if request.origin == "user" and parts.session is self._session:
            self._granted = parts.granted
        if self._config.think and not parts.think:
            self._no_thinking.add(self._model)

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
