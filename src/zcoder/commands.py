"""The slash-command registry: names, help, when they may run, argument completion.

Pure (floor 3): the interactive app dispatches on ``parse``; ``/help``, tab completion and
the docs all read the one ``COMMANDS`` table, so they cannot drift apart. Text that starts
with ``/`` but names no command is not a command: it goes to the model as typed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

__all__ = [
    "COMMANDS",
    "Command",
    "ParsedCommand",
    "complete",
    "find",
    "help_lines",
    "parse",
]


@attrs.frozen
class Command:
    """One slash command.

    ``idle_only``: refused while a turn runs. ``args_idle_only``: the bare command may run
    during a turn (it only shows something) but the form with arguments changes state.
    ``arg_kind`` names what the argument completes to (``models``, ``sessions``,
    ``agents``: the live peers' ``@labels``, a fixed ``choices`` list, or ``text``: free text
    with no completion). ``multiline``: its
    argument may span lines (``/send``'s text); every other command is one line.
    """

    name: str
    usage: str
    help: str
    idle_only: bool = False
    args_idle_only: bool = False
    arg_kind: str = ""
    choices: tuple[str, ...] = ()
    multiline: bool = False

    def arg_problem(self, args: str) -> str:
        """Why ``args`` cannot go with this command (``""`` when they can): a command that
        takes no argument refuses one rather than run as if it were not there."""
        if args.strip() and not self.arg_kind:
            return f"/{self.name} takes no argument (see /help)"
        return ""

    def needs_idle(self, args: str) -> bool:
        return self.idle_only or (self.args_idle_only and bool(args.strip()))


COMMANDS: tuple[Command, ...] = (
    Command("help", "/help", "show the commands and keys"),
    Command(
        "model",
        "/model [NAME]",
        "list the server's models, or switch to NAME",
        args_idle_only=True,
        arg_kind="models",
    ),
    Command("new", "/new", "start a new session (the current one is saved)", idle_only=True),
    Command(
        "sessions",
        "/sessions [N|ID]",
        "list this workspace's sessions, or switch to number N or id ID",
        args_idle_only=True,
        arg_kind="sessions",
    ),
    Command(
        "compact",
        "/compact [FOCUS]",
        "summarise the older history now to free the context window (FOCUS: what to keep)",
        idle_only=True,
        arg_kind="text",
    ),
    Command("context", "/context", "show how full the context window is, and with what"),
    Command("list-agents", "/list-agents", "list the other zcoder instances on this machine"),
    Command(
        "agents",
        "/agents [pause|resume|hold|accept|inbox|approve N|deny N|sent|cancel ID]",
        "show the relay state; pause/resume taking relayed work; hold/accept: let relayed "
        "messages wait for you or run; inbox: list those waiting; approve/deny one; sent: "
        "the messages you sent; cancel: withdraw one",
        arg_kind="choices",
        choices=("pause", "resume", "hold", "accept", "inbox", "approve", "deny", "sent", "cancel"),
    ),
    Command(
        "send",
        "/send TARGET TEXT",
        "send TEXT to another instance (@label or exact id) without the model",
        arg_kind="agents",
        multiline=True,
    ),
    Command("quit", "/quit", "save the session and exit"),
)


@attrs.frozen
class ParsedCommand:
    command: Command
    args: str


def find(name: str) -> Command | None:
    return next((c for c in COMMANDS if c.name == name), None)


def parse(text: str) -> ParsedCommand | None:
    """``/name args`` for a known command, else ``None`` (the text goes to the model)."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    first, newline, rest = stripped[1:].partition("\n")
    name, _, args = first.partition(" ")
    command = find(name)
    if command is None or (newline and not command.multiline):
        return None
    return ParsedCommand(command, (args + newline + rest).strip())


def complete(
    text: str,
    *,
    models: Sequence[str] = (),
    sessions: Sequence[str] = (),
    agents: Sequence[str] = (),
) -> list[str]:
    """Completions for the input ``text`` (cursor at its end): whole replacement strings.

    ``/mo`` -> ``["/model"]``; ``/model q`` -> ``["/model qwen3:8b", ...]`` from ``models``.
    """
    if not text.startswith("/") or "\n" in text:
        return []
    head, space, arg = text[1:].partition(" ")
    if not space:
        return [f"/{c.name}" for c in COMMANDS if c.name.startswith(head)]
    command = find(head)
    if command is None or " " in arg:
        return []
    pools = {"models": models, "sessions": sessions, "agents": agents, "choices": command.choices}
    pool: Sequence[str] = pools.get(command.arg_kind, ())
    return [f"/{command.name} {p}" for p in pool if p.startswith(arg)]


def help_lines() -> list[tuple[str, str]]:
    """``(usage, help)`` pairs in registry order, for ``/help``."""
    return [(c.usage, c.help + (" (not during a turn)" if c.idle_only else "")) for c in COMMANDS]
