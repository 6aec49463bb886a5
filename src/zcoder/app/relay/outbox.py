"""zcoder's extension of the relay in the app: the outbox, receipts and cancels received,
``/agents sent``, ``/agents cancel`` and the model's ``agent_message_status``.

``RelayOutbox.handle`` is the listener's extension handler (it runs in the listener's task:
it only checks and updates memory, never waits, and touches neither the session nor the
UI: the entries it makes wait in ``take_entries`` and it notes a change of the relay's
``Changes``, so the worker, which awaits those, records and shows them). A receipt is taken only
when peer credentials confirmed its sender's pid (the receiver's listener would not lie
about its own pid), for a message id this instance sent, from the instance it was sent to;
it becomes one relay entry in the transcript (persisted in the session by the app when it
takes it) and never starts a turn. A cancel is taken only from the verified sender of
the message, which the spool checks by the id's prefix (every accepted id begins with its
sender's id); a message withdrawn from the queue gets a ``cancelled`` receipt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from zcoder.app.relay.receipts import ReceiptSender
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt
from zcoder.relay.limits import PROTOCOL_VERSION
from zcoder.relay.outbox import Outbox, Sent
from zcoder.relay.spool.store import Spool, SpoolFault
from zcoder.text.flat import one_line
from zcoder.text.visible import escape_controls

__all__ = ["NO_RECEIPTS", "RelayOutbox", "headline"]

NO_RECEIPTS = "this peer sends no receipts"
_DOING = {
    "held": "holds your message for its user",
    "started": "started your message",
    "completed": "completed your message",
    "blocked": "is blocked on your message",
    "failed": "failed your message",
    "cancelled": "cancelled your message",
    "dropped": "dropped your message",
    "denied": "denied your message",
}
_CANCELLED = {
    "withdrawn": "Withdrawn: {t} removed message {m} from its queue; it will not run.",
    "too_late": "Too late: {t} has already started (or finished) message {m}; only its user "
    "can stop a running turn.",
    "unknown": "{t} has no message {m} of this instance waiting.",
    "unsupported": "{t} does not support cancel ({n}).",
}


def _first_line(text: str) -> str:
    return next((one_line(line, 160) for line in text.splitlines() if line.strip()), "")


def headline(sent: Sent) -> str:
    """``⇄ weekly-digest (pid 7) completed your message: <first line of its answer>``."""
    said = _first_line(sent.detail) if sent.state != "started" else sent.first_line
    tail = f": {said}" if said else ""
    return f"⇄ {sent.target} {_DOING.get(sent.state, sent.state)}{tail}"


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{int(seconds)} s ago"
    if seconds < 5400:
        return f"{int(seconds // 60)} min ago"
    return f"{int(seconds // 3600)} h ago"


class RelayOutbox:
    """The app's end of receipts and cancels; one per instance, owned by ``RelayLink``."""

    def __init__(
        self,
        *,
        receipts: ReceiptSender,
        spool: Callable[[], Spool | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.outbox = Outbox(clock=clock)
        self._receipts = receipts
        self._spool = spool
        self._clock = clock
        self._entries: list[TranscriptEvent] = []
        # The relay's ``Changes.note`` once the service exists: wakes the worker.
        self.notify: Callable[[], None] = lambda: None

    def take_entries(self) -> list[TranscriptEvent]:
        """The transcript entries made since the last call (receipts, withdrawals)."""
        entries, self._entries = self._entries, []
        return entries

    def _add_entry(self, event: TranscriptEvent) -> None:
        self._entries.append(event)
        self.notify()

    # -- the listener's extension handler ---------------------------------------------------

    def handle(self, request: Receipt | Cancel, verified: bool) -> str:
        """The ack status for a receipt or a cancel (see the module docstring)."""
        if not verified:
            return "invalid"
        if isinstance(request, Receipt):
            return self._receipt(request)
        return self._cancel(request)

    def _receipt(self, receipt: Receipt) -> str:
        sent = self.outbox.get(receipt.message_id)
        if sent is None or sent.target_instance_id != receipt.sender_instance_id:
            return "invalid"
        updated = self.outbox.apply(
            receipt.message_id,
            receipt.sender_instance_id,
            receipt.state,
            receipt.detail,
            receipt.changed,
        )
        if updated is not None:  # a repeat, or a state after a final one: nothing to show
            self._add_entry(self._entry(updated))
        return "accepted"

    def _entry(self, sent: Sent) -> TranscriptEvent:
        body = sent.detail if sent.state in ("completed", "blocked") else ""
        if sent.changed:
            body = f"{body}\nChanged: {', '.join(sent.changed.splitlines())}".strip()
        meta = {"receipt": sent.state, "headline": headline(sent), "message_id": sent.message_id}
        return TranscriptEvent(role="relay", text=body, meta=meta)

    def _cancel(self, cancel: Cancel) -> str:
        spool = self._spool()
        if spool is None:
            return "unknown"
        try:
            status = spool.withdraw(cancel.message_id, cancel.sender_instance_id)
        except SpoolFault:
            return "too_late"  # nothing changed; it will run
        if status == "withdrawn":
            self._receipts.send(cancel, "cancelled", "withdrawn by its sender before it ran")
            self._add_entry(
                TranscriptEvent(
                    role="system",
                    text=f"Relayed message {cancel.message_id} was withdrawn by its sender "
                    "before it ran.",
                )
            )
        return status

    # -- the sender's side ------------------------------------------------------------------

    def record(self, envelope: Enqueue, ack: Ack, target: str) -> None:
        if ack.stored:
            self.outbox.record(
                envelope.message_id,
                envelope.target_instance_id,
                target,
                envelope.body,
                receipts=bool(ack.receipts),
            )

    def sent_lines(self) -> list[str]:
        """``/agents sent``: every message this instance sent, oldest first."""
        now = self._clock()
        entries = self.outbox.entries()
        if not entries:
            return ["No messages sent from this instance yet."]
        lines = []
        for n, sent in enumerate(entries, 1):
            state = sent.state if sent.receipts else f"{sent.state} ({NO_RECEIPTS})"
            lines.append(
                f"{n:>3}. {sent.message_id} → {sent.target} · {state} · "
                f"{_age(now - sent.updated_at)} · {escape_controls(sent.first_line[:60])}"
            )
        return lines

    def find(self, ref: str) -> Sent:
        """A sent message by id or by its number in ``/agents sent``; ``CommandError``."""
        entries = self.outbox.entries()
        if ref.isdigit() and 1 <= int(ref) <= len(entries):
            return entries[int(ref) - 1]
        sent = self.outbox.get(ref)
        if sent is None:
            raise CommandError(
                f"no message {escape_controls(ref)!r} was sent from this instance: "
                "/agents sent lists them"
            )
        return sent

    async def cancel(
        self,
        ref: str,
        *,
        me: str,
        socket_of: Callable[[str], Path],
        deliver: Callable[[Path, Cancel], Awaitable[Ack]],
    ) -> str:
        """``/agents cancel REF``: the line to show. ``CommandError`` for an unknown ref or
        a message already settled; ``RelayError`` when the receiver cannot be reached."""
        sent = self.find(ref)
        if sent.final:
            raise CommandError(f"message {sent.message_id} is already {sent.state}")
        pid, _, _ = me.partition("-")
        request = Cancel(
            protocol=PROTOCOL_VERSION,
            type="cancel",
            message_id=sent.message_id,
            target_instance_id=sent.target_instance_id,
            sender_instance_id=me,
            sender_pid=int(pid),
            created_at=int(time.time()),
        )
        ack = await deliver(socket_of(sent.target_instance_id), request)
        if ack.status == "withdrawn":
            updated = self.outbox.withdrawn(sent.message_id)
            if updated is not None:
                self._add_entry(self._entry(updated))
        template = _CANCELLED.get(ack.status, "{t} answered {s}.")
        return template.format(t=sent.target, m=sent.message_id, s=ack.status, n=NO_RECEIPTS)

    def status_text(self, message_id: str) -> str | None:
        """What the model reads of a message it sent: one JSON object, or ``None``."""
        sent = self.outbox.get(message_id)
        if sent is None:
            return None
        record = {
            "message_id": sent.message_id,
            "target_instance_id": sent.target_instance_id,
            "state": sent.state,
            "receipts": sent.receipts,
            "seconds_since_update": int(self._clock() - sent.updated_at),
            "detail": sent.detail,
            "changed": sent.changed.splitlines(),
        }
        note = (
            ""
            if sent.receipts
            else f"\n{NO_RECEIPTS}: 'accepted' only means it was queued; nothing more will "
            "be known."
        )
        return json.dumps(record, ensure_ascii=False) + note
