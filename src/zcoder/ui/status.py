"""The status bar: what the app is doing, in one line. Pure model plus its rendering."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
from prompt_toolkit.formatted_text import StyleAndTextTuples

from zcoder.ui.text import model_label, one_line, shorten

__all__ = ["STATE_LABELS", "Status", "render_status"]

STATE_LABELS = {
    "ready": "ready",
    "thinking": "thinking",
    "streaming": "answering",
    "running_tool": "running a tool",
    "waiting_approval": "waiting for approval",
    "compacting": "compacting the history",
    "stopped": "stopped",
    "error": "error",
    "offline": "model unavailable",
}
_BUSY = ("thinking", "streaming", "running_tool", "waiting_approval", "compacting")
_ELAPSED_AFTER = 1.0  # seconds before the elapsed time is worth showing


@attrs.define
class Status:
    """Everything the status bar shows; the controller mutates it, then invalidates."""

    model: str
    profile: str
    title: str = "New session"
    state: str = "ready"
    detail: str = ""
    since: float = 0.0
    warmup: str = ""  # "", "warming up", "warm", "warm-up failed"
    relay: str = ""  # "" = no relay here; else "on", "paused", "off (reason)"
    relay_queued: int = 0
    relay_waits_model: bool = False  # the waiting relayed messages wait for the model to answer
    relay_stopped: bool = False  # Escape on a relayed turn: none is claimed until resumed
    relayed_from: str = ""  # the sender's project while a relayed turn runs
    queued_prompts: int = 0
    context: int | None = None  # how full the next request makes the window, in percent
    clock: Callable[[], float] = time.monotonic

    def set_state(self, state: str, detail: str = "") -> None:
        # The clock runs from the start of the work, not of its latest step: a turn that
        # thinks, runs tools and answers for a minute shows a minute.
        if state in _BUSY and not self.busy:
            self.since = self.clock()
        self.state, self.detail = state, detail

    @property
    def busy(self) -> bool:
        return self.state in _BUSY


def _state_style(state: str) -> str:
    if state == "waiting_approval":
        return "class:status.approval"
    if state in _BUSY:
        return "class:status.busy"
    if state in ("error", "offline"):
        return "class:status.error"
    return "class:status.ready"


def _state_text(status: Status) -> str:
    label = STATE_LABELS.get(status.state, status.state)
    elapsed = status.clock() - status.since
    if status.busy and elapsed >= _ELAPSED_AFTER:
        label += f" {int(elapsed)}s"
    if status.state == "ready" and status.warmup and status.warmup != "warm":
        label = status.warmup
    return f" {label} "


def render_status(status: Status, width: int = 100) -> StyleAndTextTuples:
    """`` state │ model │ profile │ “title” │ ctx N% │ N queued │ relay on (M waiting)``,
    cut to ``width``; during a relayed turn ``relayed from <project>`` stands for the title."""
    tail = []
    if status.context is not None:
        tail.append(f"ctx {status.context}%")
    if status.queued_prompts:
        tail.append(f"{status.queued_prompts} queued")
    if status.relay:
        relay = f"relay {one_line(status.relay)}"
        if status.relay_queued:
            why = " for the model" if status.relay_waits_model else ""
            why += ", stopped" if status.relay_stopped else ""
            relay += f" ({status.relay_queued} waiting{why})"
        tail.append(relay)
    state = _state_text(status)
    room = max(width - len(state) - 2, 10)
    # The title gives way first: the queue and the relay matter more in a narrow terminal.
    fixed = " │ ".join([model_label(status.model), status.profile, "“”", *tail])
    if status.relayed_from:
        head = f"relayed from {shorten(one_line(status.relayed_from), 40)}"
    else:
        head = f"“{shorten(one_line(status.title), max(room - len(fixed), 8))}”"
    parts = [model_label(status.model), status.profile, head, *tail]
    rest = shorten(" │ ".join(parts), room)
    out: StyleAndTextTuples = [(_state_style(status.state), state), ("class:status", " " + rest)]
    used = len(state) + 1 + len(rest)
    if used < width:
        out.append(("class:status", " " * (width - used)))
    return out
