"""The app's parts below the terminal (``build_app``): the channels, the backend over the
agent, and the worker, each made once, complete. The same wiring for the app
(``app/root.py``) and for the tests of the worker."""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import trio

from zcoder.agent.model import ModelClient
from zcoder.app.backend import AgentBackend
from zcoder.app.idle import IdleCommands
from zcoder.app.relay.link import RelayLink
from zcoder.app.worker import TurnWorker
from zcoder.approval.questions import Approver
from zcoder.config import Config
from zcoder.live import LiveEvent
from zcoder.session.store import Session, SessionStore
from zcoder.ui.events import Intent, Show, WorkerEvent

__all__ = ["AppCore", "build_app"]


class _ChannelSink:
    """The agent's ``TurnSink``: its live events go to the UI as worker events, in order."""

    def __init__(self, events: trio.MemorySendChannel[WorkerEvent]) -> None:
        self._events = events

    def emit(self, event: LiveEvent) -> None:
        self._events.send_nowait(Show(event))


@attrs.frozen
class AppCore:
    """What ``build_app`` makes: the backend (the UI's), the worker (over the backend's
    runner), the worker's intents to send and its events to read."""

    backend: AgentBackend
    worker: TurnWorker
    intents: trio.MemorySendChannel[Intent]
    events: trio.MemoryReceiveChannel[WorkerEvent]


def build_app(
    config: Config,
    store: SessionStore,
    session: Session,
    client: ModelClient,
    runtime_dir: Path | None,
    *,
    approver: Approver,
    relay: RelayLink | None = None,
) -> AppCore:
    """The app's parts below the terminal, each made once, complete: the channels (intents
    -> worker, worker events -> whoever draws them), the backend over the agent, the
    session store, the model client and the relay, and the worker. The same wiring for
    the app and for the tests of the worker."""
    intents_send, intents = trio.open_memory_channel[Intent](math.inf)
    events_send, events = trio.open_memory_channel[WorkerEvent](math.inf)
    backend = AgentBackend(
        config,
        store,
        session,
        client,
        runtime_dir,
        approver=approver,
        sink=_ChannelSink(events_send),
        relay=relay,
    )
    worker = TurnWorker(
        backend.runner,
        intents,
        events_send,
        commands=IdleCommands(backend),
        warmup=config.warmup,
    )
    return AppCore(backend, worker, intents_send, events)
