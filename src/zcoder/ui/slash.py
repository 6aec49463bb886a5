"""What each slash command does (the registry itself is ``zcoder.commands``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import trio

from zcoder.commands import ParsedCommand, help_lines
from zcoder.errors import ZcoderError
from zcoder.ui.backend import SessionRow
from zcoder.ui.render import render_block
from zcoder.ui.text import one_line, shorten

if TYPE_CHECKING:
    from zcoder.ui.controller import Controller

__all__ = ["KEY_HELP", "SlashCommands", "age", "session_lines"]

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


def age(seconds: float) -> str:
    if seconds < 90:
        return "just now"
    if seconds < 5400:
        return f"{int(seconds // 60)} min ago"
    if seconds < 172800:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def session_lines(rows: list[SessionRow], now: float) -> list[str]:
    out = []
    for n, row in enumerate(rows, 1):
        mark = "*" if row.current else " "
        title = shorten(one_line(row.title), 42)
        detail = row.problem or f"{row.messages} messages, {age(now - row.updated_at)}"
        out.append(f"{mark}{n:>3}. {title}  ({one_line(row.model)}; {detail})  {row.id}")
    return out


class SlashCommands:
    def __init__(self, controller: Controller) -> None:
        self.c = controller
        self.models: list[str] = []

    def _notice(self, text: str, role: str = "system") -> None:
        self.c.view.notice(text, role)

    def _print(self, title: str, lines: list[str], hang: int = 0) -> None:
        terminal = self.c.terminal
        terminal.print_above(render_block(title, lines, terminal.width(), hang=hang))

    async def run(self, parsed: ParsedCommand) -> None:
        name, args = parsed.command.name, parsed.args
        # Checked again here: the worker may have started a turn (a relayed message, a
        # queued prompt) after ``submit`` checked and before this task ran.
        if parsed.command.needs_idle(args) and self.c.refuse_during_turn(name):
            return
        try:
            if name == "help":
                self.help()
            elif name == "quit":
                self.c.request_exit("user")
            elif name == "model":
                await self.model(args)
            elif name == "new":
                self.c.backend.new_session()
                self.c.refresh_status()
                self._notice(f"New session {self.c.backend.session_id}.")
                self.c.warm_again()
            elif name == "sessions":
                await self.sessions(args)
            elif name == "list-agents":
                await self.list_agents()
            elif name == "agents":
                self.agents(args)
        except ZcoderError as exc:
            self._notice(str(exc), "error")
        except trio.TooSlowError:
            self._notice(f"/{name} took too long and was abandoned.", "error")

    async def list_agents(self) -> None:
        with trio.fail_after(_LIST_SECONDS):
            lines = await self.c.backend.list_agents()
        if len(lines) == 1:  # the no-peers sentence
            self._notice(lines[0])
        else:
            self._print("Other zcoder instances on this machine:", lines)

    def agents(self, action: str) -> None:
        lines = self.c.backend.relay_control(action)
        if action:
            self.c.refresh_status()
            self._notice(" ".join(lines))
        else:
            self._print(lines[0], lines[1:])

    def help(self) -> None:
        width = max(len(usage) for usage, _ in help_lines())
        lines = [f"{usage:<{width}}  {text}" for usage, text in help_lines()]
        lines.append("Any other text (even starting with /) is sent to the model.")
        keys = [f"{key:<{width}}  {text}" for key, text in KEY_HELP]
        self._print("Commands:", lines, hang=width + 2)
        self._print("Keys:", keys, hang=width + 2)

    async def model(self, name: str) -> None:
        with trio.fail_after(_LIST_SECONDS):
            models = await self.c.backend.list_models()
        self.models = models
        current = self.c.backend.model
        if not name:
            lines = [("* " if m == current else "  ") + one_line(m) for m in models]
            self._print(
                f"Models on the server (current: {one_line(current)}):", lines or ["(none)"]
            )
            self._notice("Switch with /model NAME.")
            return
        if name not in models:
            self._notice(
                f"model {one_line(name)!r} is not installed: run `ollama pull {one_line(name)}`, "
                "or pick one from /model",
                "error",
            )
            return
        if self.c.refuse_during_turn("model"):  # a turn started while the list loaded
            return
        self.c.backend.set_model(name)
        self.c.refresh_status()
        self._notice(f"Model set to {one_line(name)}.")
        self.c.warm_again()

    async def sessions(self, arg: str) -> None:
        rows = await self.c.backend.list_sessions()
        if not arg:
            lines = session_lines(rows, time.time())
            self._print("Sessions of this workspace and profile:", lines, hang=6)
            self._notice("Switch with /sessions N or /sessions ID.")
            return
        target = arg
        if arg.isdigit():  # a number, never an id (ids have an underscore)
            if not 1 <= int(arg) <= len(rows):
                count = f"1 to {len(rows)}" if len(rows) > 1 else "only 1"
                self._notice(f"no session number {arg}: /sessions lists {count}", "error")
                return
            target = rows[int(arg) - 1].id
        if target == self.c.backend.session_id:
            self._notice("That is the current session.")
            return
        if self.c.refuse_during_turn("sessions"):  # a turn started while the list loaded
            return
        events = self.c.backend.switch_session(target)
        for event in events[-20:]:
            self.c.view.show(event)
        self.c.refresh_status()
        skipped = f" ({len(events) - 20} earlier entries not shown)" if len(events) > 20 else ""
        self._notice(f"Switched to session {target}{skipped}.")
        self.c.warm_again()
