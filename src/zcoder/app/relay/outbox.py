"""zcoder's extension of the relay in the app: the outbox, receipts and cancels received,
``/agents sent``, ``/agents cancel`` and the model's ``agent_message_status``.

``RelayOutbox.handle`` is the listener's extension handler (it runs in the listener's task:
it only checks and updates memory, never waits, and touches neither the session nor the
UI: the entries it makes wait in ``take_entries`` and it notes a change of the relay's
``Changes``, so the worker, which awaits those, records and shows them). A receipt is taken only
when peer credentials confirmed its sender's pid (the receiver's listener would not lie
about its own pid), for a message id this instance sent, from the instance it was sent to;
a receipt that moves its state forward becomes one relay entry in the transcript
(persisted in the session by the app when it takes it) and never starts a turn; a repeat,
or a step back, is answered ``accepted`` too and makes no entry (``Outbox.apply``). The
entry names the message by its number and first words (``#3 "update weeklyDigest.ts…"``)
and shows the receiver's answer once: the headline says the step, with the reason for a
short one; a ``completed`` or ``blocked`` answer is the body only. A cancel is taken only
from the verified sender of the message, which the spool checks by the id's prefix (every
accepted id begins with its sender's id); a message withdrawn from the queue gets one
``cancelled`` receipt and one notice, however often the cancel is repeated (each repeat is
still answered ``withdrawn``).

Whether a receiver is gone (its manifest left the relay directory, or its process died) is
the caller's to find out: ``sent_lines``, ``cancel`` and ``status_text`` take it as a
function of the receiver's instance id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from zcoder.app.relay.receipts import ReceiptSender
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, RelayUnavailable
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt
from zcoder.relay.limits import PROTOCOL_VERSION
from zcoder.relay.outbox import Outbox, Sent, standing
from zcoder.relay.spool.store import Spool, SpoolFault
from zcoder.text.flat import one_line
from zcoder.text.visible import escape_controls

__all__ = ["GONE_NOTE", "NO_RECEIPTS", "RelayOutbox", "headline", "naming"]

NO_RECEIPTS = "this peer sends no receipts"
GONE_NOTE = "the receiver exited without reporting how it ended"
_NAME_CHARS = 40
_DOING = {
    "held": "holds your message {m} for its user",
    "started": "started your message {m}",
    "completed": "completed your message {m}",
    "blocked": "is blocked on your message {m}",
    "failed": "failed your message {m}",
    "cancelled": "cancelled your message {m}",
    "dropped": "dropped your message {m}",
    "denied": "denied your message {m}",
}
_ANSWERED = ("completed", "blocked")  # the detail is an answer: the entry's body
_CANCELLED = {
    "withdrawn": "Withdrawn: {t} removed message {m} from its queue; it will not run.",
    "too_late": "Too late: {t} has already started (or finished) message {m}; only its user "
    "can stop a running turn.",
    "unknown": "{t} has no message {m} of this instance waiting.",
    "unsupported": "{t} does not support cancel ({n}).",
}


def _first_line(text: str) -> str:
    return next((one_line(line, 160) for line in text.splitlines() if line.strip()), "")


def naming(sent: Sent) -> str:
    """``#3 "update weeklyDigest.ts…"``: its number in ``/agents sent`` and first words."""
    words = one_line(sent.first_line)
    if len(words) > _NAME_CHARS:
        words = words[: _NAME_CHARS - 1].rstrip() + "…"
    return f'#{sent.number} "{escape_controls(words)}"'


def headline(sent: Sent) -> str:
    """``⇄ weekly-digest (pid 7) failed your message #3 "update weeklyDigest.ts…": <why>``;
    an answer (``completed``, ``blocked``) is the entry's body, never repeated here."""
    said = "" if sent.state in _ANSWERED else escape_controls(_first_line(sent.detail))
    tail = f": {said}" if said else ""
    doing = _DOING.get(sent.state, sent.state + " your message {m}").format(m=naming(sent))
    return f"⇄ {sent.target} {doing}{tail}"


def _never(instance_id: str) -> bool:
    return False


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
        self._withdrew: set[str] = set()  # ids withdrawn here on their sender's cancel
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
        if updated is not None:  # ``None``: a repeat, or a step back: nothing to show
            self._add_entry(self._entry(updated))
        return "accepted"  # either way: the receiver need not retry

    def _entry(self, sent: Sent) -> TranscriptEvent:
        body = sent.detail if sent.state in _ANSWERED else ""
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
        if status == "withdrawn" and cancel.message_id not in self._withdrew:
            self._withdrew.add(cancel.message_id)  # a repeated cancel: answered, no more
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

    def sent_lines(self, gone: Callable[[str], bool] = _never) -> list[str]:
        """``/agents sent``: every message this instance sent, oldest first; ``gone`` tells
        whether a receiver (by instance id) has left (asked once per receiver)."""
        now = self._clock()
        entries = self.outbox.entries()
        if not entries:
            return ["No messages sent from this instance yet."]
        left: dict[str, bool] = {}
        lines = []
        for sent in entries:
            target = sent.target_instance_id
            if sent.receipts and not sent.final and target not in left:
                left[target] = gone(target)
            state = standing(sent, left.get(target, False))
            state = state if sent.receipts else f"{state} ({NO_RECEIPTS})"
            lines.append(
                f"{sent.number:>3}. {sent.message_id} → {sent.target} · {state} · "
                f"{_age(now - sent.updated_at)} · {escape_controls(sent.first_line[:60])}"
            )
        return lines

    def find(self, ref: str) -> Sent:
        """A sent message by id or by its number in ``/agents sent``; ``CommandError``."""
        numbered = self.outbox.numbered(int(ref)) if ref.isdigit() else None
        if numbered is not None:
            return numbered
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
        gone: Callable[[str], bool] = _never,
    ) -> str:
        """``/agents cancel REF``: the line to show. ``CommandError`` for an unknown ref or
        a message already settled; ``RelayUnavailable`` when its receiver is gone;
        ``RelayError`` when the receiver cannot be reached."""
        sent = self.find(ref)
        if sent.final:
            raise CommandError(f"message {sent.message_id} is already {sent.state}")
        if gone(sent.target_instance_id):
            raise RelayUnavailable(
                f"the receiver is gone: {sent.target} no longer runs; message "
                f"{naming(sent)} cannot be cancelled"
            )
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

    def status_text(self, message_id: str, gone: Callable[[str], bool] = _never) -> str | None:
        """What the model reads of a message it sent: one JSON object, or ``None``."""
        sent = self.outbox.get(message_id)
        if sent is None:
            return None
        state = standing(sent, not sent.final and gone(sent.target_instance_id))
        record = {
            "message_id": sent.message_id,
            "target_instance_id": sent.target_instance_id,
            "state": state,
            "receipts": sent.receipts,
            "seconds_since_update": int(self._clock() - sent.updated_at),
            "detail": sent.detail,
            "changed": sent.changed.splitlines(),
        }
        note = ""
        if state != sent.state:
            note = f"\n{GONE_NOTE}: it may or may not have run; nothing more will be known."
        elif not sent.receipts:
            note = (
                f"\n{NO_RECEIPTS}: 'accepted' only means it was queued; nothing more will be known."
            )
        return json.dumps(record, ensure_ascii=False) + note
