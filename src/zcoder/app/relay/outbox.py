"""zcoder's extension of the relay in the app, the sender's side: the outbox, the receipts
received, ``/agents sent``, ``/agents cancel`` and the model's ``agent_message_status``.

The listener answers receipts in the relay package (``relay/extension.py``: only from the
verified receiver a message of ours was sent to); the worker takes them with the relay's
other news and hands each to ``receipt``. A receipt that moves its state forward becomes
one relay entry in the transcript (persisted in the session by the app when it takes it
from ``take_entries``) and never starts a turn; a repeat, or a step back, makes no entry
(``Outbox.apply``). The entry names the message by its number and first words (``#3
"update weeklyDigest.ts…"``) and shows the receiver's answer once: the headline says the
step, with the reason for a short one; a ``completed`` or ``blocked`` answer is the body
only. A cancel this instance receives is the receiver's side: the spool withdraws the
message and the inbound machine tells its sender ``cancelled``.

Whether a receiver is gone (its manifest left the relay directory, or its process died) is
the caller's to find out: ``sent_lines``, ``cancel`` and ``status_text`` take it as a
function of the receiver's instance id.

The sent list is part of the session: ``open_session`` makes the current session's
outbox the one ``/agents sent`` lists and new sends go to, numbered from 1 per session. A
session opened earlier in this run keeps its outbox in memory (its receipts still arrive
while another session is current, and update it; the entry shows in the current
transcript); a session opened for the first time is rebuilt from its transcript (the send
cards' ``card_meta`` and the receipt entries' meta). The sends of a session saved by an
earlier run are shown with their last known state: their receivers report to that run's
instance id, which no longer listens, so nothing updates them and they cannot be
cancelled from here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path

from zcoder.app.relay.receipt_words import (
    ANSWERED,
    answer_of,
    changed_line,
    entry_body,
    first_words,
    headline,
    left_line,
    naming,
)
from zcoder.conversation import TranscriptEvent
from zcoder.errors import CommandError, RelayUnavailable
from zcoder.relay.client import message_counter
from zcoder.relay.envelope import Ack, Cancel, Enqueue, Receipt
from zcoder.relay.limits import PROTOCOL_VERSION
from zcoder.relay.outbox import GONE, Outbox, Sent, standing
from zcoder.text.ages import age
from zcoder.text.flat import one_line
from zcoder.text.visible import escape_controls

__all__ = [
    "EARLIER",
    "GONE_NOTE",
    "NO_RECEIPTS",
    "RelayOutbox",
    "changed_line",
    "headline",
    "naming",
    "rebuilt",
]

NO_RECEIPTS = "this peer sends no receipts"
GONE_NOTE = "the receiver exited without reporting how it ended"
EARLIER = "last known: sent by an earlier run, whose receipts cannot reach this one"
_LIST_CHARS = 60  # a row of /agents sent
_CANCELLED = {
    "withdrawn": "Withdrawn: {t} removed message {m} from its queue; it will not run.",
    "too_late": "Too late: {t} has already started (or finished) message {m}; only its user "
    "can stop a running turn.",
    "unknown": "{t} has no message {m} of this instance waiting.",
    "unsupported": "{t} does not support cancel ({n}).",
}


def rebuilt(events: Iterable[TranscriptEvent], clock: Callable[[], float] = time.time) -> Outbox:
    """A session's outbox from its transcript: each send card that kept ``card_meta`` (in
    the order sent: the same numbers), then the states its receipt entries reported."""
    box = Outbox(clock=clock)
    for event in events:
        meta = event.meta
        mid = meta.get("message_id", "")
        if not mid:
            continue
        if event.role == "tool" and meta.get("to"):
            box.restore(
                mid,
                meta["to"],
                meta.get("peer", ""),
                meta.get("first_line", ""),
                receipts=meta.get("receipts") == "yes",
                at=event.at,
                number=int(number) if (number := meta.get("number", "")).isdigit() else 0,
            )
        elif event.role == "relay" and meta.get("receipt") and (sent := box.get(mid)):
            detail = meta.get("detail", "")
            if meta["receipt"] in ANSWERED:
                detail = answer_of(event.text, meta.get("changed", ""))
            changed = meta.get("changed", "")
            box.apply(mid, sent.target_instance_id, meta["receipt"], detail, changed, at=event.at)
    return box


def _never(instance_id: str) -> bool:
    return False


class RelayOutbox:
    """The sender's end of receipts and cancels; one per instance, owned by ``Sends``."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.outbox = Outbox(clock=clock)  # the current session's
        self._books: dict[str, Outbox] = {}  # by session id: those opened in this run
        self._clock = clock
        self._entries: list[TranscriptEvent] = []
        self._left: set[str] = set()  # ids whose receiver was found gone (told once)

    def open_session(self, session_id: str, events: Iterable[TranscriptEvent]) -> None:
        """``session_id`` is now current: its outbox, kept from earlier in this run or
        rebuilt from its transcript ``events``, is what ``/agents sent`` lists."""
        book = self._books.get(session_id)
        if book is None:
            book = self._books[session_id] = rebuilt(events, self._clock)
        self.outbox = book

    def _holding(self, message_id: str) -> Outbox | None:
        """The outbox of the message: the current session's first, then the others'."""
        books = [self.outbox, *(b for b in self._books.values() if b is not self.outbox)]
        return next((b for b in books if b.get(message_id) is not None), None)

    def _get(self, message_id: str) -> Sent | None:
        book = self._holding(message_id)
        return None if book is None else book.get(message_id)

    def take_entries(self) -> list[TranscriptEvent]:
        """The transcript entries made since the last call (receipts, withdrawals)."""
        entries, self._entries = self._entries, []
        return entries

    def _add_entry(self, event: TranscriptEvent) -> None:
        self._entries.append(event)

    def waits_on_others(self) -> bool:
        """Whether a message of this run waits for a report (its receiver may leave)."""
        return any(self._unreported())

    def _unreported(self) -> Iterator[Sent]:
        books = [self.outbox, *(b for b in self._books.values() if b is not self.outbox)]
        for book in books:
            for sent in book.entries():
                told = sent.message_id in self._left
                if sent.receipts and not sent.final and not sent.earlier and not told:
                    yield sent

    def departed(self, gone: Callable[[str], bool]) -> bool:
        """Tell, once each, of the messages whose receiver left without a final report
        (it crashed or was killed: a receiver that quits says ``dropped``); ``gone`` is
        asked once per receiver. Whether an entry was made."""
        asked: dict[str, bool] = {}
        told = False
        for sent in list(self._unreported()):
            target = sent.target_instance_id
            if target not in asked:
                asked[target] = gone(target)
            if asked[target]:
                self._left.add(sent.message_id)
                meta = {"receipt": GONE, "headline": left_line(sent), "message_id": sent.message_id}
                self._add_entry(TranscriptEvent(role="relay", text="", meta=meta))
                told = True
        return told

    # -- receipts received ------------------------------------------------------------------

    def receipt(self, receipt: Receipt) -> None:
        """A receipt the listener took: an entry when it moves its message's state
        forward (``take_entries``); nothing for a repeat or a step back."""
        book = self._holding(receipt.message_id)
        sent = None if book is None else book.get(receipt.message_id)
        if book is None or sent is None or sent.target_instance_id != receipt.sender_instance_id:
            return
        before = sent.state
        updated = book.apply(
            receipt.message_id,
            receipt.sender_instance_id,
            receipt.state,
            receipt.detail,
            receipt.changed,
        )
        if updated is not None:  # ``None``: a repeat, a step back, a state unknown here
            self._add_entry(self._entry(updated, before))

    def _entry(self, sent: Sent, before: str = "") -> TranscriptEvent:
        """The transcript entry of a new state; its meta keeps what ``rebuilt`` takes back
        (the answer is the body; a short reason is kept in ``detail``)."""
        meta = {
            "receipt": sent.state,
            "headline": headline(sent, before),
            "message_id": sent.message_id,
        }
        if sent.detail and sent.state not in ANSWERED:
            meta["detail"] = sent.detail
        if sent.changed:
            meta["changed"] = sent.changed
        return TranscriptEvent(role="relay", text=entry_body(sent), meta=meta)

    # -- the sender's side ------------------------------------------------------------------

    def record(self, envelope: Enqueue, ack: Ack, target: str) -> None:
        if ack.stored:
            self.outbox.record(
                envelope.message_id,
                envelope.target_instance_id,
                target,
                envelope.body,
                receipts=bool(ack.receipts),
                number=message_counter(envelope.message_id),
            )

    def sent_lines(self, gone: Callable[[str], bool] = _never) -> list[str]:
        """``/agents sent``: every message this instance sent, oldest first; ``gone`` tells
        whether a receiver (by instance id) has left (asked once per receiver)."""
        now = self._clock()
        entries = self.outbox.entries()
        # The list is the session's; what other sessions of this run sent is still known
        # (their receipts arrive), so an empty list must not read as "nothing was sent".
        others = sum(
            not s.earlier for b in self._books.values() if b is not self.outbox for s in b.entries()
        )
        elsewhere = (
            f"{others} sent from other sessions of this run: /sessions N switches to one"
            if others
            else ""
        )
        if not entries:
            return [
                f"No messages sent in this session yet ({elsewhere})."
                if others
                else "No messages sent in this session yet."
            ]
        left: dict[str, bool] = {}
        lines = []
        for sent in entries:
            target = sent.target_instance_id
            if sent.receipts and not sent.final and not sent.earlier and target not in left:
                left[target] = gone(target)
            state = standing(sent, left.get(target, False))
            if state == "waiting" and sent.detail:  # what it waits for: its user's answer
                state = f"waiting ({escape_controls(one_line(sent.detail, _LIST_CHARS))})"
            if not sent.receipts:
                state = f"{state} ({NO_RECEIPTS})"
            elif sent.earlier and not sent.final:
                state = f"{state} ({EARLIER})"
            lines.append(
                f"{sent.number:>3}. {sent.message_id} → {sent.target} · {state} · "
                f"{age(now - sent.updated_at)} · {first_words(sent, _LIST_CHARS)}"
            )
        if others:
            lines.append(f"({elsewhere})")
        return lines

    def find(self, ref: str) -> Sent:
        """A sent message by id or by its number in ``/agents sent`` (``3`` or ``#3``, as
        its card and receipts name it); ``CommandError``."""
        number = ref.removeprefix("#")
        numbered = None
        if number.isascii() and number.isdigit():
            numbered = self.outbox.numbered(int(number))
        if numbered is not None:
            return numbered
        sent = self._get(ref)
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
        if sent.earlier:
            raise CommandError(
                f"message {naming(sent)} was sent by an earlier run of zcoder: its receiver "
                "takes a cancel only from that run"
            )
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
            book = self._holding(sent.message_id) or self.outbox
            updated = book.withdrawn(sent.message_id)
            if updated is not None:
                self._add_entry(self._entry(updated))
        template = _CANCELLED.get(ack.status, "{t} answered {s}.")
        return template.format(t=sent.target, m=sent.message_id, s=ack.status, n=NO_RECEIPTS)

    def status_text(self, message_id: str, gone: Callable[[str], bool] = _never) -> str | None:
        """What the model reads of a message it sent: one JSON object, or ``None``."""
        sent = self._get(message_id)
        if sent is None:
            return None
        left = not sent.final and not sent.earlier and gone(sent.target_instance_id)
        state = standing(sent, left)
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
        elif sent.earlier and not sent.final:
            note = f"\n{EARLIER}: it may have moved on since; nothing more will be known here."
        return json.dumps(record, ensure_ascii=False) + note
