"""The status bar: what the app is doing, in one line. Pure model plus its rendering."""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.utils import get_cwidth

from zcoder.ui.text import model_label, one_line, shorten
from zcoder.ui.wrap import fit

__all__ = ["GRANT_TEXT", "RELAY_STOPPED_TEXT", "STATE_LABELS", "Status", "render_status"]

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
# Beside ``ready`` while Escape keeps relayed work stopped: ``ready`` alone would read as if
# everything ran again, though nothing relayed starts until ``/agents resume`` (the words of
# ``/agents inbox``: "relayed work stopped: none runs until /agents resume").
RELAY_STOPPED_TEXT = "relayed work stopped"


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
    commands_granted: bool = False  # the user answered ``a``: commands run unasked
    sandbox: str = ""  # "commands sandboxed", "relayed commands sandboxed", or ""
    clock: Callable[[], float] = time.monotonic

    turn_running: bool = False  # the worker's word (TurnBegan, TurnEnded), nobody else's

    def set_state(self, state: str, detail: str = "") -> None:
        """What the running turn does now (the agent's ``StateChange``): the label only;
        whether a turn runs is ``began``/``ended``'s."""
        self.state, self.detail = state, detail

    def began(self) -> None:
        # The clock runs from the start of the turn, not of its latest step: a turn that
        # thinks, runs tools and answers for a minute shows a minute.
        self.turn_running = True
        self.since = self.clock()
        self.set_state("thinking")

    def ended(self) -> None:
        """The turn is over: a label of work in progress ("thinking") gives way to
        ``ready``; ``stopped``, ``error`` and ``offline`` stay."""
        self.turn_running = False
        if self.state in _BUSY:
            self.set_state("ready")


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
    if status.turn_running and status.state in _BUSY and elapsed >= _ELAPSED_AFTER:
        label += f" {int(elapsed)}s"
    if status.state == "ready" and status.warmup and status.warmup != "warm":
        label = status.warmup
    return f" {label} "


def _state_fragments(status: Status, beside: bool = True) -> StyleAndTextTuples:
    """The turn state; when the app waits for input (``ready``, ``warming up``) while
    relayed work is stopped, ``· relayed work stopped`` follows it, in a colour that asks
    for the user's ``/agents resume``. Otherwise (a turn runs, or ``stopped`` just after
    the Escape, or ``beside`` is false: no room) the relay part says ``stopped``."""
    state = _state_text(status)
    if not _says_stopped(status, beside):
        return [(_state_style(status.state), state)]
    return [
        (_state_style(status.state), state.rstrip(" ")),
        ("class:status.stopped", f" · {RELAY_STOPPED_TEXT} "),
    ]


def _says_stopped(status: Status, beside: bool = True) -> bool:
    """Whether the turn state says that relayed work is stopped (then the relay part need
    not say it again); ``beside``: whether the bar has room for that."""
    return beside and status.relay_stopped and status.state == "ready"


_SEP = " │ "
_MODEL_MIN = 8  # cells a shortened model name keeps (``qwen3-c…``); less says nothing
_TITLE_MIN = 8
GRANT_TEXT = "all commands allowed"


def _cells(text: str) -> int:
    return get_cwidth(text)


def _cut(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` columns, with an ellipsis when it was cut."""
    if _cells(text) <= cells:
        return text
    return text[: fit(text, cells - 1)] + "…" if cells > 1 else text[: fit(text, cells)]


def _cut_words(text: str, cells: int) -> str:
    """``_cut`` at the last word boundary that fits (``“Write a very…”``, never
    ``“Write a ve…”``); mid-word only when not even the first word fits."""
    cut = _cut(text, cells)
    if cut == text or not cut.endswith("…"):
        return cut
    kept = cut[:-1]
    if text[len(kept)] == " ":  # the cut fell between two words
        return kept.rstrip() + "…"
    head = kept.rsplit(" ", 1)[0].rstrip() if " " in kept else ""
    return head + "…" if head else cut


@attrs.define
class _Part:
    text: str
    style: str = "class:status"
    least: int = 0  # how far it may be shortened (0: never); it may still be left out
    quoted: bool = False  # a title, in quotes that stay when it is shortened

    @property
    def shown(self) -> str:
        return f"“{self.text}”" if self.quoted else self.text


def _parts(status: Status, beside: bool = True) -> dict[str, _Part]:
    """The parts after the state, by name, in their order on the bar."""
    parts = {
        "model": _Part(model_label(status.model), least=_MODEL_MIN),
        "profile": _Part(one_line(status.profile)),
    }
    if status.relayed_from:
        parts["head"] = _Part(f"relayed from {shorten(one_line(status.relayed_from), 40)}")
    else:
        parts["title"] = _Part(one_line(status.title), least=_TITLE_MIN, quoted=True)
    if status.commands_granted:
        parts["grant"] = _Part(GRANT_TEXT, "class:status.granted")
    if status.sandbox:
        parts["sandbox"] = _Part(one_line(status.sandbox))
    if status.context is not None:
        parts["ctx"] = _Part(f"ctx {status.context}%")
    if status.queued_prompts:
        parts["queued"] = _Part(f"{status.queued_prompts} queued")
    if status.relay:
        relay = f"relay {one_line(status.relay)}"
        said = []
        if status.relay_queued:
            why = " for the model" if status.relay_waits_model else ""
            said.append(f"{status.relay_queued} waiting{why}")
        # Even with none waiting: a new one would not start either.
        if status.relay_stopped and not _says_stopped(status, beside):
            said.append("stopped")
        parts["relay"] = _Part(f"{relay} ({', '.join(said)})" if said else relay)
    return parts


def _fit(status: Status, room: int, beside: bool = True) -> list[_Part]:
    """The parts that fit in ``room`` columns. The model name gives way first, then the
    session title: shortened, then left out; then the context fill and the profile. The
    turn (``relayed from``), the grant, the sandbox, the queue and the relay stay (a
    terminal too narrow even for those cuts the line's end)."""
    parts = _parts(status, beside)

    def over() -> int:
        shown = parts.values()
        return sum(_cells(p.shown) for p in shown) + len(_SEP) * (len(parts) - 1) - room

    for name in ("model", "title"):
        excess, part = over(), parts.get(name)
        if excess > 0 and part is not None:
            cut = _cut_words if part.quoted else _cut  # a title is words; a model, a name
            part.text = cut(part.text, max(_cells(part.text) - excess, part.least))
    for name in ("title", "model", "ctx", "profile"):
        if over() > 0:
            parts.pop(name, None)
    return list(parts.values())


def render_status(status: Status, width: int = 100) -> StyleAndTextTuples:
    """`` state  model │ profile │ “title” │ all commands allowed │ commands sandboxed │
    ctx N% │ N queued │ relay on (M waiting)``, fitted to ``width``; during a relayed turn
    ``relayed from <project>`` stands for the title."""
    head = _state_fragments(status)
    state = "".join(t for _, t, *_ in head)
    room = max(width - _cells(state) - 2, 10)
    parts = _fit(status, room)
    if sum(_cells(p.shown) + len(_SEP) for p in parts) - len(_SEP) > room:
        # No room for ``relayed work stopped`` beside the state and the queue: the relay
        # part says ``stopped`` instead, as during a turn, and the waiting count stays.
        head = _state_fragments(status, beside=False)
        state = "".join(t for _, t, *_ in head)
        room = max(width - _cells(state) - 2, 10)
        parts = _fit(status, room, beside=False)
    rest: StyleAndTextTuples = []
    for n, part in enumerate(parts):
        rest += [("class:status", _SEP)] if n else []
        rest.append((part.style, part.shown))
    used = sum(_cells(t) for _, t, *_ in rest)
    if used > room:  # too narrow even for what must stay: cut the end
        rest = [("class:status", _cut("".join(t for _, t, *_ in rest), room))]
        used = _cells(rest[0][1])
    pad = max(width - _cells(state) - 1 - used, 0)
    return [
        *head,
        ("class:status", " "),
        *rest,
        ("class:status", " " * pad),
    ]
