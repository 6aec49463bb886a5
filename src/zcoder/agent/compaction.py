"""The compaction plan: what to shorten, what to summarise, what to keep (pure, no I/O).

A model history that would pass the threshold is made smaller, cheapest first:

1. *Trim*: old tool results keep their head and tail (as the output cap does), old steps
   lose their thinking, and a read repeated later (the same read-only call with the same
   arguments) keeps only the latest result. No model call.
2. *Summarise*: if that is not enough, everything before the last few exchanges (an
   exchange starts at a user-role message: a prompt or a relayed task) is summarised by the
   model, text only, no tools, in requests planned from the sizes so that each one, with
   its output cap, fits the window: a part too large for one request goes in several, each
   carrying the summary so far. The summary replaces that part: one user-role record and
   the assistant's acknowledgement, then the kept exchanges word for word. A part no
   larger than that record (or under ``MIN_SUMMARISED``) is not summarised unless asked.

The relayed tasks of the summarised part (sender and task, and the outcome) are written
into the record by zcoder itself, not left to the model, so they survive every compaction.
``Compactor`` (``compactor.py``) carries the plan out; this module only measures and
builds messages. It stays one module past 400 lines: the trim, the summary plan and the
record's ledger are one decision over the same sizes, and apart each would import the
others' internals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import attrs

from zcoder.agent.context import Budget, Calibration, estimate_tokens, message_tokens
from zcoder.agent.turns import STOP_MARKER
from zcoder.conversation import Message, ToolCall
from zcoder.text.flat import one_line
from zcoder.tools.output import cap_text

__all__ = [
    "KEEP_EXCHANGES",
    "MIN_SUMMARISED",
    "SUMMARY_ACK",
    "SUMMARY_OPEN",
    "Plan",
    "Sizes",
    "compacted_history",
    "plan_compaction",
    "summary_request",
]

KEEP_EXCHANGES = 2
SUMMARY_OPEN = "<conversation_summary>"
SUMMARY_CLOSE = "</conversation_summary>"
SUMMARY_ACK = "Understood. I have the record of the earlier conversation and continue from it."
_LEDGER_HEAD = "Relayed tasks (recorded by zcoder, oldest first):"
# After a compaction the prompt should be well under the threshold, or the next few
# requests would each compact again.
_TARGET_SHARE = 0.6
# A summary request is planned to this share of the window: the estimate is not exact.
_REQUEST_SHARE = 0.9
_OLD_RESULT_CHARS = 1600  # an old tool result keeps this much, head and tail
_RECORD_WORDS = 80  # the record's own words and the acknowledgement, estimated tokens
# A summary costs a model call (tens of seconds on a small machine) and a record of its own:
# a part smaller than this (real tokens) is not worth it, whatever the record would cost.
MIN_SUMMARISED = 256
_READS = frozenset({"read_file", "read_file_range", "list_files", "search"})
_RELAY = re.compile(
    r"<agent_relay>.*?^Sender: (?P<sender>.*?)$.*?^Task:\n(?P<task>.*?)\n</agent_relay>",
    re.S | re.M,
)
_COUNTED = re.compile(r"- \((\d+) earlier relayed tasks, summarised above\)$")
SUMMARY_INSTRUCTIONS = (
    "You compact the history of a coding agent's conversation so that it can go on in a "
    "small context window. Below is the earlier part of the conversation (and the summary "
    "of what came before it, if any). Write a concise record of it, in plain text with "
    "these headings: Requests (what the user and the relayed senders asked), Decisions, "
    "Files (each file touched and why), Open work. Keep names, paths, numbers and errors "
    "exact. Do not call tools. Do not address the user; write only the record."
)


@attrs.frozen
class Sizes:
    """How the plan measures: the model's calibration, the budget, and the estimated size
    of the fixed part of the next request (the system prompt and the tool schemas)."""

    calibration: Calibration
    budget: Budget
    fixed_estimate: int

    def prompt(self, history: Sequence[Message]) -> int:
        """The real size of the next request with this history."""
        return self.calibration.tokens(self.fixed_estimate + estimate_tokens(history, []))

    def part(self, messages: Sequence[Message]) -> int:
        return self.calibration.part(estimate_tokens(messages, []))

    @property
    def history_room(self) -> int:
        """The real tokens a compacted history may take (the record and the kept tail):
        never more than half the window, and no more than the target leaves beside the
        fixed part (a chat template that renders the tool schemas can take half the window
        itself), but at least an eighth of the window. Whatever the session's length."""
        window = self.budget.window.tokens
        fixed = self.calibration.tokens(self.fixed_estimate)
        target = int(self.budget.threshold * _TARGET_SHARE)
        return min(window // 2, max(window // 8, target - fixed))

    @property
    def summary_cap(self) -> int:
        """The output cap of a summary request, and so the summary's size: an eighth of
        the window (128 to 1,024), at most a third of the history's room."""
        window = self.budget.window.tokens
        cap = min(self.budget.output_cap, 1024, max(128, window // 8), self.history_room // 3)
        return max(64, cap)

    @property
    def ledger_chars(self) -> int:
        """The room of zcoder's own record of relayed tasks: a tenth of the window, at
        most a sixth of the history's room."""
        tokens = min(self.budget.window.tokens // 10, self.history_room // 6)
        return int(tokens * 4 / self.calibration.ratio)

    @property
    def record_room(self) -> int:
        """What the record of a compaction takes at most: the summary at its cap, the
        ledger full, and the words around them."""
        return self.summary_cap + self.calibration.part(self.ledger_chars // 4 + _RECORD_WORDS)

    @property
    def chunk_estimate(self) -> int:
        """How many estimated tokens of history one summary request can carry: the window
        (with a margin) less the instructions, the summary so far and the output cap."""
        window = int(self.budget.window.tokens * _REQUEST_SHARE)
        fixed = self.calibration.part(
            estimate_tokens([Message("system", SUMMARY_INSTRUCTIONS)], []) + 16
        )
        # The output cap, and the summary so far (at most the cap's worth of characters).
        room = window - fixed - self.summary_cap - self.calibration.part(self.summary_cap)
        return int(room / self.calibration.ratio)


@attrs.frozen
class Plan:
    """A compaction: ``history`` after the trim; the part before ``keep_from`` goes to the
    summary in ``chunks`` (each one summary request), with the earlier summary ``previous``
    and zcoder's own ``ledger`` of relayed tasks. ``before``/``after`` are real token
    counts of the next request (``after`` counts the summary at its cap); ``fits`` says
    whether that request leaves the reply its room."""

    history: tuple[Message, ...]
    keep_from: int
    chunks: tuple[tuple[Message, ...], ...]
    previous: str
    ledger: tuple[str, ...]
    before: int
    after: int
    fits: bool
    message_chars: int = 0  # a message of a chunk is cut to this many characters

    @property
    def summarises(self) -> bool:
        return self.keep_from > 0

    @property
    def changes(self) -> bool:
        return self.summarises or self.after < self.before


def exchange_starts(history: Sequence[Message]) -> list[int]:
    """Where each exchange starts: the index of every user-role message."""
    return [i for i, m in enumerate(history) if m.role == "user"]


def _read_key(call: ToolCall) -> str:
    if call.name not in _READS:
        return ""
    return f"{call.name}\0{json.dumps(dict(call.arguments), sort_keys=True, default=str)}"


def trim(history: Sequence[Message], protect_from: int, result_chars: int) -> list[Message]:
    """The cheap stage, on the messages before ``protect_from``: long tool results keep
    their head and tail, thinking goes, and a read repeated later keeps only the latest."""
    latest: dict[str, int] = {}  # a read's key -> the index of its latest result
    keys: dict[int, str] = {}  # a read result's index -> its key
    calls: list[str] = []
    for i, message in enumerate(history):
        if message.role == "assistant":
            calls = [_read_key(c) for c in message.tool_calls]
        elif message.role == "tool" and calls:
            key = calls.pop(0)
            if key:
                keys[i] = key
                latest[key] = i
    out: list[Message] = []
    for i, message in enumerate(history):
        if i >= protect_from:
            out.append(message)
            continue
        if message.thinking:
            message = attrs.evolve(message, thinking="")
        if message.role == "tool":
            if i in keys and latest[keys[i]] != i:
                text = f"[superseded: a later identical {message.tool_name} call has the result]"
                message = attrs.evolve(message, content=text)
            elif len(message.content) > result_chars:
                message = attrs.evolve(message, content=cap_text(message.content, result_chars))
        out.append(message)
    return out


def _previous(older: Sequence[Message]) -> tuple[str, list[str], int]:
    """An earlier summary at the start: its text, its ledger lines, and where the rest
    begins (0 when there is none)."""
    if not older or not older[0].content.startswith(SUMMARY_OPEN):
        return "", [], 0
    body = older[0].content[len(SUMMARY_OPEN) :].removesuffix(SUMMARY_CLOSE).strip()
    text, _, ledger = body.partition(_LEDGER_HEAD)
    lines = [line for line in ledger.splitlines() if line.startswith("- ")]
    skip = 2 if len(older) > 1 and older[1].content == SUMMARY_ACK else 1
    return text.strip(), lines, skip


def _outcome(messages: Sequence[Message]) -> str:
    """What became of an exchange: its last answer, a finish, or its stop."""
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        if message.content == STOP_MARKER:
            return "stopped by the receiver's user"
        for call in message.tool_calls:
            if call.name == "finish":
                status = str(call.arguments.get("status", "complete"))
                return f"{status}: {one_line(str(call.arguments.get('response', '')), 80)}"
        if message.content.strip():
            return f"answered: {one_line(message.content, 80)}"
    return "no answer recorded"


def relay_ledger(older: Sequence[Message]) -> list[str]:
    """One line for each relayed task in ``older``: sender, task, outcome."""
    starts = exchange_starts(older)
    lines = []
    for n, start in enumerate(starts):
        match = _RELAY.search(older[start].content)
        if match is None:
            continue
        end = starts[n + 1] if n + 1 < len(starts) else len(older)
        sender, task = one_line(match["sender"], 60), one_line(match["task"], 80)
        lines.append(f'- from {sender}: "{task}" -> {_outcome(older[start + 1 : end])}')
    return lines


def _fit_ledger(lines: list[str], chars: int) -> tuple[str, ...]:
    """The newest lines that fit in ``chars``; the older ones become one count line (an
    earlier record's count line adds its count)."""
    counted = sum(int(m[1]) for line in lines if (m := _COUNTED.match(line)))
    lines = [line for line in lines if not _COUNTED.match(line)]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > chars and kept:
            break
        kept.append(line)
        used += len(line) + 1
    dropped = counted + len(lines) - len(kept)
    head = [f"- ({dropped} earlier relayed tasks, summarised above)"] if dropped else []
    return (*head, *reversed(kept))


def _chunks(older: Sequence[Message], budget: int, chars: int) -> tuple[tuple[Message, ...], ...]:
    """``older`` in groups of at most ``budget`` estimated tokens as a summary request
    renders them (a message longer than ``chars`` is cut)."""
    chunks: list[tuple[Message, ...]] = []
    current: list[Message] = []
    used = 0
    for message in older:
        # as rendered (a tiny tool result costs more there than in the history), with a
        # message's overhead for its label and separator
        size = min(message_tokens(Message("user", _render(message, chars))), budget)
        if current and used + size > budget:
            chunks.append(tuple(current))
            current, used = [], 0
        current.append(message)
        used += size
    if current:
        chunks.append(tuple(current))
    return tuple(chunks)


def plan_compaction(
    history: Sequence[Message],
    sizes: Sizes,
    *,
    force: bool = False,
    keep_exchanges: int = KEEP_EXCHANGES,
) -> Plan:
    """Plan the compaction of ``history`` (the current request is its last exchange).

    Without ``force`` the trim alone is used when it brings the next request under the
    target; ``force`` (``/compact``, a server's context error) summarises what lies
    before the kept tail. Without it, a part smaller than the record that would replace it
    (or than ``MIN_SUMMARISED``) is never summarised: that costs a model call and leaves
    the next request no smaller.
    """
    before = sizes.prompt(history)
    target = int(sizes.budget.threshold * _TARGET_SHARE)
    starts = exchange_starts(history)
    current = starts[-1] if starts else 0
    trimmed = trim(history, current, _OLD_RESULT_CHARS)
    room = sizes.history_room
    if not force and sizes.prompt(trimmed) <= target and sizes.part(trimmed) <= room:
        return _plan_without_summary(trimmed, before, sizes)
    # The kept exchanges get what the record leaves of the history's room: the history
    # after a compaction stays under its floor however long the session grew.
    tail_room = room - sizes.record_room
    keep_from = current
    # By hand (``force``) something is summarised whenever there is an earlier exchange.
    most = min(keep_exchanges, len(starts) - 1 if force else len(starts))
    for k in range(most, 0, -1):
        tail = trimmed[starts[-k] :]
        if sizes.part(tail) <= tail_room:
            keep_from = starts[-k]
            break
    if keep_from == 0:
        # Nothing before the current exchange: only its own older tool results can give.
        trimmed = trim(trimmed, len(trimmed) - 1, _tail_chars(sizes))
        return _plan_without_summary(trimmed, before, sizes)
    tail = trimmed[keep_from:]
    # The exchange in progress alone may pass the floor (one long task): it is shortened
    # only when the request would not fit the window.
    overhead = sizes.calibration.tokens(sizes.fixed_estimate) + sizes.record_room
    if not sizes.budget.fits(overhead + sizes.part(tail)):
        tail = trim(tail, len(tail) - 1, _tail_chars(sizes))
        trimmed = [*trimmed[:keep_from], *tail]
    previous, old_ledger, skip = _previous(trimmed[:keep_from])
    # A record written for a larger window (or a longer-worded model) is cut to the room a
    # summary request leaves the summary so far.
    previous = cap_text(previous, sizes.summary_cap * 4)
    older = trimmed[skip:keep_from]
    ledger = _fit_ledger([*old_ledger, *relay_ledger(older)], sizes.ledger_chars)
    chunk_budget = sizes.chunk_estimate
    message_chars = max(256, chunk_budget * 4 - 64)
    after_history = compacted_history("x" * (sizes.summary_cap * 4), ledger, tail)
    after = sizes.prompt(after_history)
    small = sizes.part(trimmed[:keep_from]) < MIN_SUMMARISED
    if not force and (small or after >= sizes.prompt(trimmed)):
        # The part a summary would replace is no larger than the record (at its cap) that
        # replaces it, or too small to be worth a model call: summarising cannot help. The
        # kept part's old results give what they can instead. By hand (``force``) the model
        # is asked anyway (its record may come out shorter than the cap); the turn keeps
        # the old history when it does not.
        trimmed = trim(trimmed, len(trimmed) - 1, _tail_chars(sizes))
        return _plan_without_summary(trimmed, before, sizes)
    return Plan(
        history=tuple(trimmed),
        keep_from=keep_from,
        chunks=_chunks(older, chunk_budget, message_chars) if older else ((),) if previous else (),
        previous=previous,
        ledger=ledger,
        before=before,
        after=after,
        fits=chunk_budget > 64 and sizes.budget.fits(after),
        message_chars=message_chars,
    )


def _tail_chars(sizes: Sizes) -> int:
    """What a tool result of the kept part keeps when that part alone is too large."""
    return max(400, int(sizes.budget.window.tokens * 4 / sizes.calibration.ratio) // 6)


def _plan_without_summary(trimmed: list[Message], before: int, sizes: Sizes) -> Plan:
    after = sizes.prompt(trimmed)
    return Plan(
        history=tuple(trimmed),
        keep_from=0,
        chunks=(),
        previous="",
        ledger=(),
        before=before,
        after=after,
        fits=sizes.budget.fits(after),
    )


def _render(message: Message, chars: int) -> str:
    label = message.role if message.role != "tool" else f"tool result of {message.tool_name}"
    text = message.content
    if message.tool_calls:
        calls = "; ".join(
            f"{c.name} {json.dumps(dict(c.arguments), default=str)}" for c in message.tool_calls
        )
        text = f"{text}\n(called {calls})".strip()
    return f"[{label}]\n{cap_text(text, chars)}"


def summary_request(
    chunk: Sequence[Message], previous: str, focus: str, message_chars: int
) -> list[Message]:
    """The messages of one summary request: the instructions, then the summary so far and
    this part of the conversation as text (no tool calls, no tool results as such)."""
    parts = []
    if previous:
        parts.append(f"Summary of what came before:\n{previous}")
    if chunk:
        rendered = "\n\n".join(_render(m, message_chars) for m in chunk)
        parts.append(f"The conversation to add to it:\n{rendered}")
    ask = "Write the record now."
    if focus:
        ask += f" Give most room to: {focus}"
    parts.append(ask)
    return [
        Message(role="system", content=SUMMARY_INSTRUCTIONS),
        Message(role="user", content="\n\n".join(parts)),
    ]


def compacted_history(
    summary: str, ledger: Sequence[str], tail: Sequence[Message]
) -> list[Message]:
    """The model history after a compaction: the record, its acknowledgement, the tail."""
    body = [
        "The earlier part of this conversation was compacted to save room; this is its record.",
        summary.strip() or "(the model gave no summary)",
    ]
    if ledger:
        body.append(_LEDGER_HEAD + "\n" + "\n".join(ledger))
    record = f"{SUMMARY_OPEN}\n" + "\n\n".join(body) + f"\n{SUMMARY_CLOSE}"
    return [
        Message(role="user", content=record),
        Message(role="assistant", content=SUMMARY_ACK),
        *tail,
    ]
