"""Carry out a compaction plan (``compaction.py``): ask the model for the summary, part by
part, and build the new model history. Nothing changes until the whole summary is in: a
cancel (Escape) or a failure leaves the history as it was.

The summary requests are text only (no tools, no thinking), each with the output cap the
plan allowed for. A server that cannot be reached fails the compaction (the model is down:
the turn fails as it would have anyway); any other failure of a summary request, or an
empty summary, falls back to zcoder's own record (the relayed tasks and the user's requests,
word for word), so that a long-lived receiver never stops for want of room.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from zcoder.agent.compaction import Plan, Sizes, compacted_history, summary_request
from zcoder.agent.model import ChatRequest, ModelClient
from zcoder.conversation import Message
from zcoder.errors import ModelError, ServerUnavailable
from zcoder.text.counts import counted
from zcoder.text.flat import one_line
from zcoder.tools.output import cap_text

__all__ = ["Compacted", "run_plan"]

_log = logging.getLogger(__name__)


@attrs.frozen
class Compacted:
    """A finished compaction: the new history, how many messages the summary replaced
    (0: only trimmed), and why the model's summary was not used (``""`` when it was)."""

    history: list[Message]
    replaced: int
    fallback: str = ""

    def line(self, before: Sequence[Message], tokens_before: int, tokens_after: int) -> str:
        """The transcript's one line for this compaction of the history ``before``."""
        if self.replaced:
            what = f"compacted {self.replaced} message{'s' if self.replaced != 1 else ''}"
        else:
            count = sum(a != b for a, b in zip(before, self.history, strict=True))
            what = f"compacted: shortened {count} old tool result{'s' if count != 1 else ''}"
        note = ""
        if self.fallback:
            note = f"; no summary from the model ({self.fallback}): zcoder kept its own record"
        return f"{what} ({tokens_before:,} -> {counted(tokens_after, 'token')}){note}"


async def _ask(client: ModelClient, request: ChatRequest) -> str:
    text: list[str] = []
    async with client.stream_chat(request) as chunks:
        async for chunk in chunks:
            text.append(chunk.content)
    return "".join(text).strip()


def _mechanical(older: Sequence[Message], previous: str, why: str) -> str:
    requests = [
        f"- {one_line(m.content, 120)}"
        for m in older
        if m.role == "user" and not m.content.startswith("<")
    ][-10:]
    parts = [f"(zcoder could not get a summary from the model: {why}; this record is its own.)"]
    if previous:
        parts.append(previous)
    if requests:
        parts.append("Requests:\n" + "\n".join(requests))
    return "\n\n".join(parts)


async def run_plan(
    plan: Plan,
    sizes: Sizes,
    *,
    client: ModelClient,
    model: str,
    temperature: float | None,
    focus: str = "",
) -> Compacted:
    """The history after ``plan``: trimmed, and summarised where the plan says so."""
    if not plan.summarises:
        return Compacted(list(plan.history), 0)
    summary, fallback = plan.previous, ""
    for chunk in plan.chunks:
        messages = summary_request(chunk, summary, focus, plan.message_chars)
        request = ChatRequest(
            model=model,
            messages=messages,
            tools=(),
            think=False,
            num_ctx=sizes.budget.window.tokens,
            num_predict=sizes.summary_cap,
            temperature=temperature,
        )
        try:
            text = await _ask(client, request)
        except ServerUnavailable:
            raise
        except ModelError as exc:
            _log.debug("summary request failed: %r", exc)
            fallback = one_line(str(exc), 160)
            break
        if not text:
            fallback = "it answered with nothing"
            break
        summary = text
    older = plan.history[: plan.keep_from]
    if fallback:
        summary = cap_text(_mechanical(older, plan.previous, fallback), sizes.summary_cap * 4)
    tail = plan.history[plan.keep_from :]
    return Compacted(compacted_history(summary, plan.ledger, tail), plan.keep_from, fallback)
