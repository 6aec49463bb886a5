"""The slash-command registry: names, help, when they may run, argument completion.

Pure (floor 3): the interactive app dispatches on ``interpret``; ``/help``, tab completion
and the docs all read the one ``COMMANDS`` table, so they cannot drift apart.

What counts as a command attempt: input whose first word is a single ``/word`` (lower-case
letters and hyphens, then a space, a line break or the end). A known word runs that command;
an unknown one (``/hepl``) is refused with the nearest names (``did you mean /help?``) and
reaches no model. Everything else is text for the model, paths included (``/etc/hosts is
odd``, ``/usr/bin/foo fails``). A doubled slash sends a command attempt to the model on
purpose: ``//hepl me`` goes as ``/hepl me``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

__all__ = [
    "AGENTS_ACTIONS",
    "COMMANDS",
    "Command",
    "ParsedCommand",
    "Refused",
    "complete",
    "find",
    "help_lines",
    "interpret",
    "parse",
    "suggest",
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


AGENTS_ACTIONS = (
    "pause",
    "resume",
    "hold",
    "accept",
    "inbox",
    "show",
    "approve",
    "deny",
    "sent",
    "cancel",
)

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
    Command(
        "undo",
        "/undo",
        "take back the files the last turn changed (yours or a relayed one); "
        "files changed since by someone else are kept",
        idle_only=True,
    ),
    Command(
        "rewind",
        "/rewind [N]",
        "list this session's turns that changed files, or take back turn N and every later one",
        args_idle_only=True,
        arg_kind="text",
    ),
    Command("context", "/context", "show how full the context window is, and with what"),
    Command("mcp", "/mcp", "list the MCP servers, their state and their tools"),
    Command("list-agents", "/list-agents", "list the other zcoder instances on this machine"),
    Command(
        "agents",
        "/agents [ACTION]",
        "show the relay state; ACTION: pause/resume taking relayed work; hold/accept: let "
        "relayed messages wait for you or run; inbox: list those waiting; show N: read one "
        "whole; approve N/deny N: run or drop it; sent: the messages you sent; cancel ID: "
        "withdraw one",
        arg_kind="choices",
        choices=AGENTS_ACTIONS,
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


@attrs.frozen
class Refused:
    """A command attempt that does not run: ``problem`` says why, in one line."""

    problem: str


# A command attempt: one lower-case ``/word`` first, then whitespace or the end.
_ATTEMPT = re.compile(r"/([a-z][a-z-]*)(?=\s|$)")


def find(name: str) -> Command | None:
    return next((c for c in COMMANDS if c.name == name), None)


def parse(text: str) -> ParsedCommand | None:
    """``/name args`` for a known command, else ``None`` (see ``interpret``)."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    first, newline, rest = stripped[1:].partition("\n")
    name, _, args = first.partition(" ")
    command = find(name)
    if command is None or (newline and not command.multiline):
        return None
    return ParsedCommand(command, (args + newline + rest).strip())


def interpret(text: str) -> ParsedCommand | Refused | str:
    """What the input ``text`` is: a command to run, a command attempt that is refused, or
    the text to send to the model (``//word`` loses one slash; anything else as typed)."""
    stripped = text.strip()
    if stripped.startswith("//") and _ATTEMPT.match(stripped, 1):
        return stripped[1:]
    attempt = _ATTEMPT.match(stripped)
    if attempt is None:
        return text
    name = attempt.group(1)
    command = find(name)
    if command is None:
        near = suggest(name)
        hint = f"did you mean {near}?" if near else "see /help"
        return Refused(f"unknown command /{name}: {hint} (//{name} sends it to the model)")
    parsed = parse(stripped)
    if parsed is None:  # a one-line command with more lines after it
        return Refused(f"/{name} takes one line (//{name} sends this text to the model)")
    problem = command.arg_problem(parsed.args)
    return Refused(problem) if problem else parsed


def _distance(a: str, b: str) -> int:
    """Edit distance with swapped neighbours as one edit (``hepl`` is 1 from ``help``)."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


def suggest(word: str, names: Sequence[str] = ()) -> str:
    """The closest of ``names`` (default: the commands, as ``/name``) to a mistyped
    ``word``, or ``""`` when none is close: ``/help``, ``/send or /sessions``. Close is a
    prefix (``mod``) or at most two edits, fewer than the word has letters and at most half
    the name's (``tmp`` is not ``/mcp``)."""
    pool = list(names) or [c.name for c in COMMANDS]
    slash = "" if names else "/"
    scored = [
        (d, n)
        for n in pool
        if (d := 0 if n.startswith(word) else _distance(word, n))
        <= min(2, len(word) - 1, max(len(n) // 2, 1))
    ]
    if not scored:
        return ""
    best = min(d for d, _ in scored)
    return " or ".join(f"{slash}{n}" for d, n in scored if d == best)


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
    return [(c.usage, _idle_note(c.help) if c.idle_only else c.help) for c in COMMANDS]


def _idle_note(text: str) -> str:
    """An idle-only command's help, saying that it waits for a running turn (typed during
    one, it is queued and runs after it): one parenthesis, not two in a row."""
    note = "waits for a running turn to end"
    return f"{text[:-1]}; {note})" if text.endswith(")") else f"{text} ({note})"
