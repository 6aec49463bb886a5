"""The words of a receipt entry on the sender's screen (``app/relay/outbox.py`` makes the
entries): the headline that says the step (``⇄ beta (pid 7) failed your message #3
"update weeklyDigest.ts…": <why>``), the line of a receiver that left without a final
report, the changed-files line, and the body that holds an answer once."""

from __future__ import annotations

from zcoder.relay.outbox import WITHDRAWN, Sent
from zcoder.text.flat import one_line
from zcoder.text.visible import escape_controls

__all__ = [
    "ANSWERED",
    "answer_of",
    "changed_line",
    "entry_body",
    "first_words",
    "headline",
    "left_line",
    "naming",
]

_NAME_CHARS = 40
_DOING = {
    "held": "holds your message {m} for its user",
    "started": "started your message {m}",
    "waiting": "waits on your message {m}",
    "completed": "completed your message {m}",
    "blocked": "is blocked on your message {m}",
    "failed": "failed your message {m}",
    "cancelled": "cancelled your message {m}",
    "dropped": "dropped your message {m}",
    "denied": "denied your message {m}",
}
_GOES_ON = "goes on with your message {m}"  # ``started`` again, after ``waiting``
ANSWERED = ("completed", "blocked")  # the detail is an answer: the entry's body


def _first_line(text: str) -> str:
    return next((one_line(line, 160) for line in text.splitlines() if line.strip()), "")


def first_words(sent: Sent, chars: int) -> str:
    """Its first line in at most ``chars`` characters, ending in ``…`` when cut."""
    words = one_line(sent.first_line)
    if len(words) > chars:
        words = words[: chars - 1].rstrip() + "…"
    return escape_controls(words)


def naming(sent: Sent) -> str:
    """``#3 "update weeklyDigest.ts…"``: its number in ``/agents sent`` and first words."""
    return f'#{sent.number} "{first_words(sent, _NAME_CHARS)}"'


def headline(sent: Sent, before: str = "") -> str:
    """``⇄ weekly-digest (pid 7) failed your message #3 "update weeklyDigest.ts…": <why>``;
    an answer (``completed``, ``blocked``) is the entry's body, never repeated here. A
    ``started`` after ``waiting`` (``before``) says the turn goes on."""
    said = "" if sent.state in ANSWERED else escape_controls(_first_line(sent.detail))
    tail = f": {said}" if said else ""
    doing = _DOING.get(sent.state, sent.state + " your message {m}")
    if sent.state == "started" and before == "waiting":
        doing = _GOES_ON
    if sent.state == "cancelled" and sent.detail == WITHDRAWN:  # our cancel, not its user's
        doing = "removed your message {m} from its queue"
    doing = doing.format(m=naming(sent))
    return f"⇄ {sent.target} {doing}{tail}"


_LEFT_WITH = {
    "held": "holding your message {m} for its user",
    "accepted": "with your message {m} still queued",
}


def left_line(sent: Sent) -> str:
    """``⇄ beta (pid 7) is gone, holding your message #2 "…" for its user: …``: its
    receiver left without a final report (the last one it sent is what is known)."""
    doing = _LEFT_WITH.get(sent.state, "while running your message {m}")
    return (
        f"⇄ {sent.target} is gone, {doing.format(m=naming(sent))}: it exited without "
        "reporting how the message ended, so whether it ran is not known"
    )


def changed_line(changed: str) -> str:
    """``Changed: a.py, b.py`` from a receipt's ``changed`` lines; its notes (``(commands
    ran too: ...)``, ``(and 3 more)``) follow the paths, and with no path it says so."""
    lines = [line.strip() for line in changed.splitlines() if line.strip()]
    paths = [escape_controls(line) for line in lines if not line.startswith("(")]
    notes = [escape_controls(line) for line in lines if line.startswith("(")]
    if paths:
        return " ".join([f"Changed: {', '.join(paths)}", *notes])
    notes = [note.removeprefix("(").removesuffix(")") for note in notes]
    return "No file edited; " + "; ".join(notes) if notes else ""


def entry_body(sent: Sent) -> str:
    said = sent.detail if sent.state in ANSWERED else ""
    return "\n".join(part for part in (said, changed_line(sent.changed)) if part)


def answer_of(text: str, changed: str) -> str:
    """The answer in a receipt entry's body (``_entry_body``): without its changed line."""
    tail = changed_line(changed)
    if tail and text.endswith(tail):
        text = text[: -len(tail)]
    return text.rstrip("\n")
