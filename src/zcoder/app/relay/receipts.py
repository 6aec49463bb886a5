"""The receiver's receipts: what became of each relayed message, told to its exact sender.

``ReceiptSender.send(message, state, detail, changed)`` never blocks and never fails: it
puts the receipt in the queue of its destination, the message's sender (``_QUEUE`` receipts
at most per destination, ``_DESTINATIONS`` destinations at most; beyond either the receipt is
dropped and logged). Each destination with receipts waiting has one task of its own, started
in ``run``'s nursery, that delivers them in order, so ``started`` always comes before the
final state, and ends as soon as its queue is empty: no task is kept for a sender that went
quiet. Destinations never wait for each other: a mute sender (one that accepts the
connection and never answers) holds up only its own receipts. Each receipt goes to the
socket of the sender's manifest, the manifest whose pid is the message's ``sender_pid`` (a
sender gone or replaced gets none), with one retry and a deadline of its own; a receipt that
still cannot be delivered is dropped. A sender that answers ``unsupported`` (a version-1
peer) gets no more receipts. A sender that answers ``waiting`` with ``invalid`` (a zcoder
from before that state, whose reader knows only its own states) gets no more ``waiting``:
strict in what we send, the rest of its receipts go on as before. ``flush(bound)`` waits
for every destination at once, so the whole exit stays within ``bound``.

``ChangeRecorder`` sits in the agent's sink and notes the workspace paths a turn's
``write_file``, ``replace_text`` and ``apply_patch`` calls changed; a ``run_command`` that
ran makes the receipt say that what commands changed is not known, unless the turn's
checkpoint saw every change (then its paths are the list). ``final_state`` maps a
turn's outcome to the receipt's state and detail.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from zcoder.agent.turns import TurnOutcome
from zcoder.errors import RelayError
from zcoder.live import LiveEvent, ToolUpdate, TurnSink
from zcoder.relay import client
from zcoder.relay.envelope import Receipt
from zcoder.relay.limits import PROTOCOL_VERSION
from zcoder.relay.manifest import load_manifest
from zcoder.relay.receipt_states import (
    MAX_CHANGED_CHARS,
    MAX_CHANGED_PATHS,
    MAX_DETAIL_CHARS,
    RECEIPT_STATES,
)
from zcoder.text.flat import one_line

__all__ = [
    "COMMANDS_NOTE",
    "ChangeRecorder",
    "MessageRef",
    "ReceiptSender",
    "final_state",
    "shorten_detail",
]

_log = logging.getLogger(__name__)
_QUEUE = 64  # receipts waiting per destination
_DESTINATIONS = 64  # destinations with receipts waiting
_RETRY_PAUSE = 0.2
COMMANDS_NOTE = "(commands ran too: what they changed is not known)"
_EDITS = frozenset({"write_file", "replace_text"})
_PATCH_PATH = re.compile(r"^(?:\+\+\+ b/|--- a/)(\S.*)$", re.MULTILINE)


def shorten_detail(text: str) -> str:
    """At most ``MAX_DETAIL_CHARS``, cut with an ellipsis; NUL removed."""
    text = text.replace("\0", "").strip()
    if len(text) <= MAX_DETAIL_CHARS:
        return text
    return text[: MAX_DETAIL_CHARS - 1] + "…"


def final_state(outcome: TurnOutcome) -> tuple[str, str]:
    """The receipt's final state and detail for a relayed turn's outcome."""
    if outcome.status in ("answered", "complete"):
        return "completed", shorten_detail(outcome.text)
    if outcome.status == "cut_off":
        return "completed", shorten_detail(f"(cut off at the output limit) {outcome.text}")
    if outcome.status == "blocked":
        return "blocked", shorten_detail(outcome.text)
    if outcome.status == "cancelled":
        return "cancelled", "stopped by the receiver's user"
    if outcome.status == "error":
        return "failed", one_line(outcome.error or "the turn failed", 300)
    why = "it hit the step limit" if outcome.status == "step_limit" else "a loop was stopped"
    return "failed", shorten_detail(f"{why}. {outcome.text}".strip())


class ChangeRecorder:
    """A ``TurnSink`` in front of ``inner`` that notes what the current turn changed."""

    def __init__(self, inner: TurnSink) -> None:
        self._inner = inner
        self._paths: list[str] = []
        self._commands = False

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, ToolUpdate) and event.state == "completed":
            self._note(event)
        self._inner.emit(event)

    def _note(self, event: ToolUpdate) -> None:
        if event.name in _EDITS and event.target:
            self._add(event.target)
        elif event.name == "apply_patch":
            for path in _PATCH_PATH.findall(event.diff):
                self._add(path.strip())
        elif event.name == "run_command":
            self._commands = True

    def _add(self, path: str) -> None:
        if path not in self._paths and path != "/dev/null":
            self._paths.append(path)

    def start(self) -> None:
        self._paths, self._commands = [], False

    def changed(self, known: Sequence[str] | None = None) -> str:
        """The paths, one per line, bounded; then the commands note when one ran.
        ``known``: the paths the turn's checkpoint saw change (by commands too), which
        replace the file tools' paths and the note."""
        paths = self._paths if known is None else list(known)
        lines = paths[:MAX_CHANGED_PATHS]
        if len(paths) > MAX_CHANGED_PATHS:
            lines.append(f"(and {len(paths) - MAX_CHANGED_PATHS} more)")
        if self._commands and known is None:
            lines.append(COMMANDS_NOTE)
        text = "\n".join(one_line(line, 400) for line in lines)
        return text[:MAX_CHANGED_CHARS]


class MessageRef(Protocol):
    """What a receipt needs of the message it reports on: an ``Enqueue``, or the ``Cancel``
    that withdrew it (both name the message and its sender)."""

    @property
    def message_id(self) -> str: ...

    @property
    def sender_instance_id(self) -> str: ...

    @property
    def sender_pid(self) -> int: ...


@attrs.frozen
class _Job:
    message: MessageRef
    receipt: Receipt


@attrs.define
class ReceiptStatistics:
    queued: int = 0
    delivered: int = 0
    dropped: int = 0
    unsupported: int = 0
    destinations: int = 0  # now with receipts waiting or in delivery: one task each


class ReceiptSender:
    """Best-effort receipts from this instance (``me``: its id, ``""`` while unknown)."""

    def __init__(
        self,
        *,
        me: Callable[[], str],
        relay_dir: Callable[[], Path | None],
        io_timeout: float,
        max_bytes: int,
    ) -> None:
        self._me = me
        self._relay_dir = relay_dir
        self._io_timeout = io_timeout
        self._max_bytes = max_bytes
        # Per destination (the sender's instance id), the receipts not yet delivered, in
        # order; a key is present exactly while its task runs or waits for ``run``.
        self._queues: dict[str, deque[_Job]] = {}
        self._nursery: trio.Nursery | None = None  # ``run``'s, while it runs
        self._unsupported: set[str] = set()  # senders that answered unsupported
        self._no_waiting: set[str] = set()  # senders that refused a ``waiting`` receipt
        self._pending = 0
        self._idle = trio.Event()
        self._idle.set()
        self.stats = ReceiptStatistics()

    @property
    def alive(self) -> bool:
        """``run`` runs and is not cancelled: a receipt queued now can go out (what
        ``flush`` waits for). Asked from a task of the same nursery."""
        return self._nursery is not None and trio.current_effective_deadline() != -math.inf

    def send(self, message: MessageRef, state: str, detail: str = "", changed: str = "") -> None:
        """Report ``state`` of ``message`` to its sender; never blocks, never raises for a
        receipt it cannot send (logged and dropped). ``ValueError`` for an unknown state."""
        if state not in RECEIPT_STATES:
            raise ValueError(f"unknown receipt state {state!r}")
        me = self._me()
        sender = message.sender_instance_id
        if not me or sender in self._unsupported:
            return
        try:
            receipt = Receipt(
                protocol=PROTOCOL_VERSION,
                type="receipt",
                message_id=message.message_id,
                target_instance_id=sender,
                sender_instance_id=me,
                sender_pid=os.getpid(),
                state=state,
                detail=shorten_detail(detail),
                changed=changed[:MAX_CHANGED_CHARS].replace("\0", ""),
                created_at=int(time.time()),
            )
            self._queue(sender).append(_Job(message, receipt))
        except (ValueError, TypeError, trio.WouldBlock) as exc:
            self.stats.dropped += 1
            _log.info("relay receipt %s for %s dropped: %s", state, message.message_id, exc)
            return
        self.stats.queued += 1
        self._pending += 1
        self._idle = trio.Event()

    def _queue(self, target: str) -> deque[_Job]:
        """The queue of ``target``, with its task started (``WouldBlock`` when full)."""
        queue = self._queues.get(target)
        if queue is None:
            if len(self._queues) >= _DESTINATIONS:
                raise trio.WouldBlock(f"receipts wait for {_DESTINATIONS} senders already")
            queue = self._queues[target] = deque()
            self.stats.destinations = len(self._queues)
            if self._nursery is not None:
                self._nursery.start_soon(self._drain, target)
        elif len(queue) >= _QUEUE:
            raise trio.WouldBlock(f"{_QUEUE} receipts wait for {target} already")
        return queue

    async def run(self) -> None:
        """Deliver the queued receipts, each destination in order and on its own, until
        cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for target in self._queues:  # queued before the start
                    nursery.start_soon(self._drain, target)
                await trio.sleep_forever()
        finally:
            self._nursery = None

    async def flush(self, bound: float) -> None:
        """Wait, at most ``bound`` seconds (shielded: it runs on the way out), until every
        queued receipt was delivered or dropped."""
        with trio.move_on_after(bound, shield=True):
            await self._idle.wait()

    async def _drain(self, target: str) -> None:
        """Deliver ``target``'s receipts in order; end once its queue is empty (no
        checkpoint between the last look and the end, so no receipt is left behind)."""
        queue = self._queues[target]
        while queue:
            try:
                await self._deliver(queue[0])
            finally:
                queue.popleft()  # delivered, dropped, or cancelled on the way out
                self._pending -= 1
                if not self._pending:
                    self._idle.set()
        del self._queues[target]
        self.stats.destinations = len(self._queues)

    async def _deliver(self, job: _Job) -> None:
        receipt = job.receipt
        target = receipt.target_instance_id
        if target in self._unsupported:
            return
        if receipt.state == "waiting" and target in self._no_waiting:
            return  # it refused one: it reads only the states it had (an older zcoder)
        for attempt in (1, 2):
            try:
                socket_path = self._socket_of(job.message)
                with trio.fail_after(4 * self._io_timeout):
                    ack = await client.request(
                        socket_path, receipt, io_timeout=self._io_timeout, max_bytes=self._max_bytes
                    )
            except (RelayError, trio.TooSlowError) as exc:
                if attempt == 2:
                    self.stats.dropped += 1
                    _log.info("relay receipt to %s dropped: %s", target, exc or "timed out")
                    return
                await trio.sleep(_RETRY_PAUSE)
                continue
            if ack.status == "unsupported":
                self._unsupported.add(target)
                self.stats.unsupported += 1
            elif ack.status == "accepted":
                self.stats.delivered += 1
            else:
                if ack.status == "invalid" and receipt.state == "waiting":
                    self._no_waiting.add(target)
                self.stats.dropped += 1
                _log.info("relay receipt to %s answered %s", target, ack.status)
            return

    def _socket_of(self, message: MessageRef) -> Path:
        relay_dir = self._relay_dir()
        if relay_dir is None:
            raise RelayError("the relay directory is not known")
        manifest = load_manifest(relay_dir, message.sender_instance_id)
        if manifest.pid != message.sender_pid:
            raise RelayError("the sender's manifest names another process")
        return Path(manifest.socket)
