"""Command approval decisions and the sysadmin guard. Pure: no trio, no I/O.

``decide_command`` turns (policy, profile, turn origin, earlier grant) into run / ask / deny /
blocked; ``apply_answer`` says what the user's answer means; ``guard_command`` (from
``zcoder.shell.guard``) is the catastrophic-command guard that runs before approval in sysadmin.

Decision order: ``deny`` policy first; then in sysadmin the guard, and every other command
asks with ``y``/``n`` (``--yes`` never reaches here: config refuses it); in coding ``allow``
runs, a relayed turn asks with ``y``/``a``/``n`` where ``a`` approves that one command (an
earlier ``a`` does not apply, and this one grants nothing), and a local turn runs when an
earlier ``a`` granted the rest of the conversation, else asks ``y``/``a``/``n``.

The sandbox (``--sandbox``, and ``[relay] commands = "sandbox"`` for relayed turns) runs a
command confined and unasked (``CommandVerdict.sandboxed``); a command the model asks to run
outside it always asks ``y``/``n`` (``outside``), and ``[relay] commands = "deny"`` denies
a relayed turn's commands. ``--deny-commands`` and the sysadmin rules come first.

``control_file`` is the rule for a relayed turn's file writes: a write to an instruction or
control file (any ``AGENTS.md``, anything under a ``.git`` directory, anything under zcoder's
own home) asks the local user first, whatever the command policy (``--yes`` included): what
another instance's model asked for must not rewrite this instance's instructions, history
or configuration unseen.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Literal

import attrs

from zcoder.approval.questions import Answer
from zcoder.config import CommandPolicy, Profile
from zcoder.conversation import Origin
from zcoder.relay.settings import RelayCommands
from zcoder.shell.guard import guard_command

__all__ = [
    "DENIED_BY_POLICY",
    "RELAY_DENIED",
    "CommandVerdict",
    "apply_answer",
    "command_control_files",
    "commands_sandboxed",
    "control_file",
    "decide_command",
    "decide_tool_call",
    "denial_text",
    "guard_command",
]

DENIED_BY_POLICY = "command execution is disabled (--deny-commands or ZCODER_COMMAND_POLICY=deny)"
RELAY_DENIED = (
    "command execution is disabled for relayed requests here "
    '([relay] commands = "deny" or ZCODER_RELAY_COMMANDS=deny)'
)
_ASK_WITH_A: tuple[Answer, ...] = ("y", "a", "n")
_ASK_ONCE: tuple[Answer, ...] = ("y", "n")


@attrs.frozen
class CommandVerdict:
    """What to do with one ``run_command`` call.

    ``reason`` is the tool-result text for ``deny``/``blocked``, and for ``ask`` why it asks
    despite ``--yes`` (when it does); ``choices`` are the answers to offer for ``ask``;
    ``sandboxed``: ``run`` means run in the sandbox; ``outside``: the question is about
    running outside a sandbox that would otherwise apply.
    """

    action: Literal["run", "ask", "deny", "blocked"]
    reason: str = ""
    choices: tuple[Answer, ...] = ()
    sandboxed: bool = False
    outside: bool = False


def decide_command(
    command: str,
    *,
    policy: CommandPolicy,
    profile: Profile,
    origin: Origin,
    granted: bool,
    workspace: Path,
    home: Path,
    cwd: Path | None = None,
    relay_commands: RelayCommands = "ask",
    outside: bool = False,
) -> CommandVerdict:
    """Decide one command. ``granted`` is an earlier ``a`` in this conversation; ``cwd`` is
    where the command will run (default: the workspace), used by the sysadmin guard;
    ``relay_commands`` is ``[relay] commands``; ``outside``: the model asked to run this
    command outside the sandbox."""
    if policy == "deny":
        return CommandVerdict("deny", DENIED_BY_POLICY)
    if origin == "relay" and relay_commands == "deny":
        return CommandVerdict("deny", RELAY_DENIED)
    if profile == "sysadmin":
        reason = guard_command(command, workspace=workspace, home=home, cwd=cwd)
        if reason is not None:
            return CommandVerdict("blocked", reason)
        # "allow" cannot come from config with sysadmin; should it arrive anyway, still ask.
        return CommandVerdict("ask", choices=_ASK_ONCE)
    if commands_sandboxed(policy, profile, origin, relay_commands):
        if outside:  # never a grant: each command outside the sandbox is asked about
            return CommandVerdict("ask", choices=_ASK_ONCE, outside=True)
        return CommandVerdict("run", sandboxed=True)
    if policy == "allow":
        if origin == "relay" and (why := command_control_files(command, home=home)):
            # --yes still applies to a relayed turn (the spec), but not to its commands
            # that reach instruction or control files, as its file tools do not.
            return CommandVerdict("ask", why, choices=_ASK_ONCE)
        return CommandVerdict("run")
    if origin == "relay":
        # The spec's rule: ``a`` approves only this command here (``apply_answer``).
        return CommandVerdict("ask", choices=_ASK_WITH_A)
    if granted:
        return CommandVerdict("run")
    return CommandVerdict("ask", choices=_ASK_WITH_A)


def commands_sandboxed(
    policy: CommandPolicy, profile: Profile, origin: Origin, relay_commands: RelayCommands
) -> bool:
    """Whether a turn's commands run in the sandbox (unless one asks to run outside)."""
    if policy == "deny" or profile == "sysadmin":
        return False
    if origin == "relay" and relay_commands != "ask":
        return relay_commands == "sandbox"
    return policy == "sandbox"


def decide_tool_call(
    asks: Literal["always", "relayed"],
    *,
    policy: CommandPolicy,
    profile: Profile,
    origin: Origin,
) -> Literal["run", "ask", "deny"]:
    """A call of a tool that asks (an MCP server's): like a command, but a relayed turn
    always asks (even under ``--yes``), and ``a`` is never offered. ``relayed`` (the
    server's ``allow = true``) and ``--yes`` run it unasked in a local turn of the coding
    profile (sysadmin asks every time, as for commands); ``--deny-commands`` denies it."""
    if policy == "deny":
        return "deny"
    if origin == "relay" or profile == "sysadmin":
        return "ask"
    return "run" if asks == "relayed" or policy == "allow" else "ask"


def apply_answer(answer: Answer, *, origin: Origin, profile: Profile) -> tuple[bool, bool]:
    """Return ``(run_this_command, grant_rest_of_conversation)`` for the user's answer.

    ``a`` grants the rest of the conversation only in a local turn of the coding profile. In
    a relayed turn it is offered and approves this one command only; in sysadmin it is not
    offered, and if it arrives anyway it too approves this one command only. Whether ``a``
    grants (``apply_answer("a", ...)[1]``) is also what the question says it does.
    """
    if answer == "n":
        return (False, False)
    if answer == "a":
        return (True, origin == "user" and profile == "coding")
    return (True, False)


def denial_text(command: str) -> str:
    """The tool result the model gets when the user says no."""
    return f"user denied command: {command}"


_GIT_DIR = re.compile(r"(?:^|[\s/'\"=:;|&<>(])\.git(?:$|[\s/'\";|&<>)])")
_GIT_CONFIG = re.compile(r"\bgit\b[^;|&\n]*\b(?:config|hooks?|core\.hookspath)\b", re.I)


def command_control_files(command: str, *, home: PurePath) -> str:
    """Why a relayed turn's shell command needs the user's yes even under ``--yes``
    (``""``: it does not): its text names the AGENTS.md chain, a ``.git`` directory, git's
    configuration or hooks, or zcoder's own configuration. A shell command cannot be judged
    exactly (variables, scripts, interpreters), so this reads its text and errs towards
    asking; it is a guard against the plain cases, not a sandbox."""
    text = command.replace("\\\n", " ")
    if "agents.md" in text.lower():
        return "the command names AGENTS.md (project instructions)"
    if _GIT_DIR.search(text):
        return "the command names a git repository's own data (.git)"
    if _GIT_CONFIG.search(text):
        return "the command changes or reads git's configuration or hooks"
    if str(home) in text or "ZCODER_HOME" in text or ".config/zcoder" in text:
        return f"the command names zcoder's own configuration ({home})"
    return ""


def control_file(
    shown: str, forms: Sequence[PurePath], *, workspace: PurePath, home: PurePath
) -> str:
    """Why a write to ``shown`` needs the user's yes in a relayed turn (``""``: it does
    not). ``forms`` are the absolute forms of the target to judge: its lexical form and,
    from the caller's I/O edge, where its symlinks lead; any form that is a control file
    makes it one. The AGENTS.md chain is judged by name at any depth (a subdirectory's
    file joins the chain once the workspace moves there)."""
    for form in forms:
        path = PurePath(os.path.normpath(workspace / form))
        if ".git" in path.parts:
            return f"{shown} is part of a git repository's own data (.git)"
        if path.name == "AGENTS.md":
            return f"{shown} holds project instructions (the AGENTS.md chain)"
        if path.is_relative_to(home):
            return f"{shown} is zcoder's own configuration ({home})"
    return ""
