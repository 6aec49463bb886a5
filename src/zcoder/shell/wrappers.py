"""Which program a simple command really runs, and what script a shell is given.

``strip_wrappers`` drops what stands before the real command: reserved words (``{`` ``!``
``if`` ``then`` ``do`` ``time``...), variable assignments (``X=1``) and wrapper programs with
their options (``sudo -u root``, ``env -i X=1``, ``command``, ``nice -n 5``, ``timeout 10``,
``nohup``, ``stdbuf -oL``, ``ionice -c3``, ``xargs -0``, ``busybox``...). ``shell_script``
returns the command string of ``sh -c STRING`` (also ``bash -lc``, ``su -c``). Pure, floor 2.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence

from zcoder.shell.words import SimpleCommand

__all__ = ["shell_script", "strip_wrappers"]

_RESERVED = frozenset({
    "{", "}", "!", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "time",
    "coproc",
})  # fmt: skip
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_SUDO_OPTIONS = frozenset({
    "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R", "--user", "--group",
    "--chdir", "--prompt", "--role", "--type", "--other-user", "--close-from", "--host",
    "--command-timeout", "--chroot",
})  # fmt: skip
# wrapper -> (options that take a separate argument, positional arguments before the command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (_SUDO_OPTIONS, 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nohup": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "setsid": (frozenset(), 0),
    "xargs": (
        frozenset({"-I", "-i", "-n", "-P", "-d", "-E", "-L", "-s", "-a", "--max-args"}),
        0,
    ),
    "busybox": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
}
_SHELL_ARG_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _skip_options(words: list[str], with_arg: frozenset[str], env: bool) -> list[str]:
    """Drop leading options (and ``NAME=value`` for env)."""
    k = 0
    while k < len(words):
        w = words[k]
        if w == "--":
            return words[k + 1 :]
        if env and _ASSIGNMENT.match(w):
            k += 1
        elif not w.startswith("-") or w == "-":
            break
        elif w in with_arg:
            k += 2
        else:
            k += 1
    return words[k:]


def strip_wrappers(
    words: Sequence[str], *, split: Callable[[str], list[SimpleCommand]]
) -> list[str]:
    """The words of the real command; ``split`` re-reads ``env -S "..."`` strings."""
    rest = list(words)
    while rest:
        head = rest[0]
        name = posixpath.basename(head)
        if head in _RESERVED or _ASSIGNMENT.match(head):
            rest = rest[1:]
            continue
        if name not in _WRAPPERS:
            return rest
        args = rest[1:]
        if name == "command" and any(a in ("-v", "-V") for a in args[:2]):
            return []  # a lookup, not a run
        if name == "env":
            args = _split_string(args, split)
        with_arg, positional = _WRAPPERS[name]
        rest = _skip_options(args, with_arg, env=name == "env")[positional:]
    return rest


def _split_string(args: list[str], split: Callable[[str], list[SimpleCommand]]) -> list[str]:
    """``env -S "a b"`` / ``--split-string=...``: the string is more words."""
    for k, a in enumerate(args):
        text = None
        if a in ("-S", "--split-string") and k + 1 < len(args):
            text, after = args[k + 1], args[k + 2 :]
        elif a.startswith("--split-string="):
            text, after = a.split("=", 1)[1], args[k + 1 :]
        elif a.startswith("-S") and len(a) > 2:
            text, after = a[2:], args[k + 1 :]
        if text is not None:
            inner = [w for c in split(text) for w in c.words]
            return args[:k] + inner + after
    return args


def shell_script(name: str, args: Sequence[str]) -> str | None:
    """The script text of ``sh -c SCRIPT`` / ``su -c SCRIPT``, or None (file or stdin)."""
    if name == "su":
        for k, a in enumerate(args):
            if a in ("-c", "--command") and k + 1 < len(args):
                return args[k + 1]
            if a.startswith("--command="):
                return a.split("=", 1)[1]
        return None
    has_c, k = False, 0
    while k < len(args):
        a = args[k]
        if a == "--" or not a.startswith(("-", "+")) or a in ("-", "+"):
            k += a == "--"
            break
        if a in _SHELL_ARG_OPTIONS:
            k += 2
            continue
        has_c = has_c or (not a.startswith("--") and "c" in a[1:])
        k += 1
    if has_c and k < len(args):
        return args[k]
    return None
