"""The words and bounds of zcoder's receipts and cancels (its extension of version 1).

Pure constants, no imports: the envelope validates with them, the app and the outbox speak
them.
"""

from __future__ import annotations

__all__ = [
    "CANCEL_STATUSES",
    "FINAL_STATES",
    "MAX_CHANGED_CHARS",
    "MAX_CHANGED_PATHS",
    "MAX_DETAIL_CHARS",
    "RECEIPT_STATES",
    "STATE_WORD_CHARS",
]

#: What a receiver reports about a message it accepted. ``started`` comes first; then one
#: final state. ``held`` may come before ``started`` (waiting for the receiver's user);
#: ``waiting`` after it, while the running turn waits for the receiver's user (a question),
#: and ``started`` again when it goes on.
RECEIPT_STATES: tuple[str, ...] = (
    "held",
    "started",
    "waiting",
    "completed",
    "blocked",
    "failed",
    "cancelled",
    "dropped",
    "denied",
)
FINAL_STATES = frozenset({"completed", "blocked", "failed", "cancelled", "dropped", "denied"})
#: What a reader takes as a receipt's state: a known one, or a word a newer receiver may
#: send, which it answers ``accepted`` and ignores (a liberal reader; a writer sends only
#: ``RECEIPT_STATES``).
STATE_WORD_CHARS = 32

#: The ack statuses that answer a ``cancel`` (and only a cancel): removed from the queue,
#: already running (only the receiver's user stops a running turn), not a message waiting
#: there from this sender.
CANCEL_STATUSES: tuple[str, ...] = ("withdrawn", "too_late", "unknown")

#: A receipt's ``detail``: the final answer or the one-line reason, shortened to this.
MAX_DETAIL_CHARS = 2000
#: A receipt's ``changed``: workspace paths, one per line, at most this many and chars.
MAX_CHANGED_PATHS = 50
MAX_CHANGED_CHARS = 8000
