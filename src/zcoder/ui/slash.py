"""What each slash command does (the registry itself is ``zcoder.commands``).

``HANDLERS`` maps the name of every command the UI runs to its handler: the listings and
the reports. The handlers reach the rest of the app only through ``SlashHost``: the
backend's queries, the screen, and intents for the worker. The idle-only forms (``/new``,
``/model NAME``, ``/sessions N``, ``/compact``, ``/undo``, ``/rewind N``) and ``/agents``
(but ``sent`` and ``cancel``) are not run here: the controller sends them to the worker,
which runs them in its own task (``app/idle.py``) and sends what they show.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from zcoder.commands import AGENTS_ACTIONS, ParsedCommand, help_lines, suggest
from zcoder.conversation import TranscriptEvent
from zcoder.errors import ZcoderError
from zcoder.text.ages import age
from zcoder.ui.backend import Backend, SessionRow
from zcoder.ui.events import Intent, RelayControl
from zcoder.ui.text import model_label, one_line, shorten
from zcoder.ui.wrap import wrap_line

__all__ = [
    "HANDLERS",
    "KEY_HELP",
    "SlashCommands",
    "SlashHost",
    "session_lines",
    "two_columns",
]

_LIST_SECONDS = 10.0
KEY_HELP = (
    ("Enter", "send (during a turn: queue as the next prompt)"),
    ("Alt+Enter, Ctrl-J", "new line (Shift+Enter too, where the terminal reports it)"),
    ("Esc", "stop the running turn; deny an open question"),
    ("y / a / n", "answer a command question (once / all this conversation / no)"),
    ("Tab", "complete slash commands and their arguments"),
    ("Up / Down", "input history (kept across runs)"),
    ("Ctrl-C", "clear the input; on an empty input, exit"),
    ("Ctrl-D", "exit (on an empty input)"),
)


_ACTIONS = (
    "the actions: pause, resume, hold, accept, inbox, show N, approve N, deny N, sent, cancel ID"
)


_OTHER_TEXT = (
    "Other text goes to the model, a path too (/etc/hosts is odd); an unknown /word "
    "alone is answered as a typo, not sent: //word sends /word."
)


_INDENT = 4  # ``render_block`` indents every line by four columns
_MIN_TEXT = 24  # a second column narrower than this is stacked under the first


def two_columns(rows: list[tuple[str, str]], width: int, left: int = 0) -> list[str]:
    """``rows`` as two aligned columns in ``width`` terminal columns (minus the block's
    indent): each text wrapped with a hanging indent under its own column. The first column
    is as wide as its longest entry (at least ``left``); where that leaves too little room,
    each text goes under its entry instead, indented by two."""
    room = max(width - _INDENT, 10)
    col = max([left, *(len(key) for key, _ in rows)])
    if room - col - 2 < _MIN_TEXT:
        out = []
        for key, text in rows:
            out += [key, *("  " + row for _, row in wrap_line(text, room - 2))]
        return out
    out = []
    for key, text in rows:
        wrapped = [row for _, row in wrap_line(text, room - col - 2)]
        out.append(f"{key:<{col}}  {wrapped[0]}")
        out += [" " * (col + 2) + row for row in wrapped[1:]]
    return out


def session_lines(rows: list[SessionRow], now: float) -> list[str]:
    out = []
    for n, row in enumerate(rows, 1):
        mark = "*" if row.current else " "
        title = shorten(one_line(row.title), 42)
        count = f"{row.messages} message{'' if row.messages == 1 else 's'}"
        detail = row.problem or f"{count}, {age(now - row.updated_at)}"
        if row.summary.oneshot:
            detail += ", a one-shot run"
        # A model file's name, not its path (as the status bar names it).
        out.append(f"{mark}{n:>3}. {title}  ({model_label(row.model)}; {detail})  {row.id}")
    return out


class SlashHost(Protocol):
    """What a slash command may use."""

    @property
    def backend(self) -> Backend: ...

    def width(self) -> int: ...
    def notice(self, text: str, role: str = "system") -> None: ...
    def print_block(self, title: str, lines: list[str], hang: int | None = None) -> None: ...
    def show(self, event: TranscriptEvent) -> None: ...
    def refresh_status(self) -> None: ...
    def request_exit(self, reason: str = "user") -> None: ...
    def intend(self, intent: Intent) -> None: ...


class SlashCommands:
    def __init__(self, host: SlashHost) -> None:
        self.host = host
        self.models: list[str] = []

    def _notice(self, text: str, role: str = "system") -> None:
        self.host.notice(text, role)

    def _print(self, title: str, lines: list[str], hang: int | None = None) -> None:
        self.host.print_block(title, lines, hang)

    async def run(self, parsed: ParsedCommand) -> None:
        name, args = parsed.command.name, parsed.args
        try:
            await HANDLERS[name](self, args)
        except ZcoderError as exc:
            self._notice(str(exc), "error")
        except trio.TooSlowError:
            self._notice(f"/{name} took too long and was abandoned.", "error")

    async def quit(self, args: str) -> None:
        self.host.request_exit("user")

    async def list_agents(self, args: str = "") -> None:
        with trio.fail_after(_LIST_SECONDS):
            lines = await self.host.backend.list_agents()
        if len(lines) == 1:  # the no-peers sentence
            self._notice(lines[0])
        else:
            self._print("Other zcoder instances on this machine:", lines)

    async def agents(self, action: str) -> None:
        word, _, rest = action.partition(" ")
        if word and word not in AGENTS_ACTIONS:
            near = suggest(word, AGENTS_ACTIONS)
            hint = f"did you mean /agents {near}?" if near else "see /help"
            self._notice(f"unknown /agents action {word}: {hint} ({_ACTIONS})", "error")
            return
        if word == "sent":
            lines = self.host.backend.relay_sent()
            self._print("Messages sent in this session:", lines)
            return
        if word == "cancel":
            if not rest.strip():
                self._notice("usage: /agents cancel ID (or its number in /agents sent)", "error")
                return
            with trio.fail_after(_LIST_SECONDS):
                self._notice(await self.host.backend.relay_cancel(rest.strip()))
            return
        self.host.intend(RelayControl(action))  # the worker runs it, and what it shows

    async def send(self, args: str) -> None:
        # Not idle-only: it starts no turn and touches neither the model's history nor the
        # session's state, so it may go out while a turn runs (docs/relay.rst says why). No
        # deadline here: the delivery has the relay's own, and cutting it short would leave
        # unknown whether the receiver stored the message.
        await self.host.backend.send_message(args)

    async def help(self, args: str = "") -> None:
        width, left = self.host.width(), max(len(key) for key, _ in [*help_lines(), *KEY_HELP])
        lines = two_columns(help_lines(), width, left)
        lines += [row for _, row in wrap_line(_OTHER_TEXT, max(width - _INDENT, 10))]
        self._print("Commands:", lines)
        self._print("Keys:", two_columns(list(KEY_HELP), width, left))

    async def model(self, name: str) -> None:
        with trio.fail_after(_LIST_SECONDS):
            models = await self.host.backend.list_models()
        self.models = models
        current = self.host.backend.model
        lines = [("* " if m == current else "  ") + one_line(m) for m in models]
        self._print(f"Models on the server (current: {one_line(current)}):", lines or ["(none)"])
        self._notice("Switch with /model NAME.")

    async def rewind(self, arg: str) -> None:
        lines = self.host.backend.rewind_lines()
        if not lines:
            self._notice("No turn of this session has changed files yet.")
            return
        self._print("Turns of this session that changed files:", lines, hang=5)
        self._notice("/rewind N takes back turn N and every later one; /undo the last.")

    async def context(self, args: str = "") -> None:
        with trio.fail_after(_LIST_SECONDS):
            lines = await self.host.backend.context_lines()
        self._print("Context window:", lines, hang=14)

    async def mcp(self, args: str = "") -> None:
        self._print("MCP servers:", self.host.backend.mcp.lines(), hang=2)

    async def sessions(self, arg: str) -> None:
        rows = await self.host.backend.list_sessions()
        lines = session_lines(rows, time.time())
        self._print("Sessions of this workspace and profile:", lines, hang=6)
        more = ""
        if any(row.summary.oneshot for row in rows):
            more = " One-shot runs (zcoder -p) come last, the newest only; /sessions ID opens any."
        self._notice(f"Switch with /sessions N or /sessions ID.{more}")


Handler = Callable[[SlashCommands, str], Awaitable[None]]
HANDLERS: dict[str, Handler] = {
    "help": SlashCommands.help,
    "model": SlashCommands.model,
    "sessions": SlashCommands.sessions,
    "rewind": SlashCommands.rewind,
    "context": SlashCommands.context,
    "mcp": SlashCommands.mcp,
    "list-agents": SlashCommands.list_agents,
    "agents": SlashCommands.agents,
    "send": SlashCommands.send,
    "quit": SlashCommands.quit,
}
