"""The catastrophic-command guard of the sysadmin profile. Pure: reads no file, runs nothing.

It blocks, before any approval question, the commands that wreck a machine in one go:
formatting, raw writes onto block devices, deleting or re-owning ``/``, a system directory,
the home directory, the workspace root (or a directory containing them), fork bombs, and
``sh -c``/``eval`` nested deeper than four levels. Every simple command of a line is checked
(``;`` ``&&`` ``||`` ``|`` ``&``, newlines, subshells) after stripping wrappers (``sudo``,
``env X=1``, ``command``, ``nice``, ``timeout``...), and the text run by ``sh -c``, ``eval``,
a shell's here-document or piped ``echo``, and ``$(...)`` bodies is checked recursively.

Paths are judged lexically: ``~`` and ``$HOME`` are the home directory, ``$PWD`` the current
directory, any other variable is taken as empty (the classic ``rm -rf "$DIR/"*`` with an
unset ``DIR``), ``${X:-w}`` both as ``$X`` and as ``w`` (also ``${X-w}``, ``${X:=w}``,
``${X:+w}``...); ANSI-C strings are decoded by the lexer (``$'\\x2f'`` is ``/``); relative
paths are joined to the directory the command runs in (``cd`` within the line is followed).
It is a safety net under the approval question, not a sandbox.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from zcoder.shell.forms import parameter_word
from zcoder.shell.words import SimpleCommand, split_commands
from zcoder.shell.wrappers import shell_script, strip_wrappers

__all__ = ["MAX_NESTING", "guard_command"]

MAX_NESTING = 4
_MAX_SUBSTITUTION_DEPTH = 16
_SYSTEM_DIRS = (
    "/", "/etc", "/usr", "/var", "/home", "/bin", "/boot", "/dev", "/lib", "/lib64", "/opt",
    "/proc", "/root", "/sbin", "/srv", "/sys",
)  # fmt: skip
_SAFE_DEVICES = frozenset({
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin",
    "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/console",
})  # fmt: skip
_SAFE_DEVICE_DIRS = ("/dev/fd/", "/dev/pts/", "/dev/shm/", "/dev/tcp/", "/dev/udp/")
_NAME = r"[^\s(){};|&<>'\"`]+"
_FUNCTION = re.compile(
    rf"(?:\bfunction\s+)?({_NAME})\s*\(\s*\)\s*\{{([^{{}}]*)\}}"
    rf"|\bfunction\s+({_NAME})\s*\{{([^{{}}]*)\}}"
)
_FORK_LOOPS = re.compile(r"\bfork\s+while\s+fork\b|\bwhile\b[^\n]{0,60}\bos\.fork\s*\(")
_VARIABLE = re.compile(r"\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])|\$\(.*?\)|`[^`]*`")
_WILDCARD_ALL = re.compile(r"[.*?]*\*[.*?]*")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
_DELETERS = frozenset({"rm", "chmod", "chown", "chgrp"})
_DEVICE_WRITERS = frozenset({"tee", "cp", "shred", "mkswap", "truncate"})
_FORMATTERS = frozenset({"mke2fs", "mkdosfs", "mkntfs", "mkexfatfs", "mkreiserfs"})
_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")
_MAX_BRACE_WORDS = 64
_MAX_READINGS = 256
_DESTRUCTIVE_EXEC = frozenset({"rm", "chmod", "chown", "chgrp", "shred", "unlink"})
_REDIRECT_OUT = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


class _Blocked(Exception):
    """Internal: carries the reason out of the recursion."""


@attrs.frozen
class _Scope:
    workspace: str
    home: str

    def protected(self, path: str) -> str | None:
        """Why deleting ``path`` (possibly a glob) is catastrophic, or None."""
        named = {self.home: "your home directory", self.workspace: "the workspace root"}
        for target, label in named.items():
            if path == target:
                return label
        if path in _SYSTEM_DIRS:
            return "the root directory" if path == "/" else "a system directory"
        for target, label in named.items():
            if target.startswith(path.rstrip("/") + "/"):
                return f"a directory containing {label}"
        if any(c in path for c in "*?["):
            return self._glob(path)
        return None

    def _glob(self, pattern: str) -> str | None:
        parent, last = posixpath.split(pattern)
        if _WILDCARD_ALL.fullmatch(last) and self.protected(parent or "/"):
            return f"everything in {parent or '/'}"
        for target in (*_SYSTEM_DIRS, self.home, self.workspace):
            if fnmatch.fnmatchcase(target, pattern):
                return f"a pattern matching {target}"
        return None


def _fork_bomb(text: str) -> bool:
    for m in _FUNCTION.finditer(text):
        name, body = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        calls = re.search(rf"(?<![^\s(){{}};|&<>]){re.escape(name)}(?![^\s(){{}};|&<>])", body)
        if calls and ("|" in body or "&" in body):
            return True
    return _FORK_LOOPS.search(text) is not None


def _is_device(path: str) -> bool:
    if path == "/proc/sysrq-trigger":
        return True
    if not path.startswith("/dev/") or path in _SAFE_DEVICES:
        return False
    return not path.startswith(_SAFE_DEVICE_DIRS)


def _braces(word: str) -> list[str]:
    """Brace expansion (``/{etc,usr}``), bounded: a guard must not explode on ``{a,b}{c,d}...``."""
    out: list[str] = []
    todo = [word]
    while todo and len(out) + len(todo) <= _MAX_BRACE_WORDS:
        w = todo.pop()
        m = _BRACE.search(w)
        if m is None:
            out.append(w)
            continue
        todo += [w[: m.start()] + part + w[m.end() :] for part in m.group(1).split(",")]
    return out + todo


def _brace_end(word: str, i: int) -> int:
    """The index of the ``}`` closing the ``${`` whose body starts at ``word[i]``, or -1."""
    depth = 1
    for j in range(i, len(word)):
        if word.startswith("${", j):
            depth += 1
        elif word[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _first_default(word: str) -> tuple[str, str, list[str], str] | None:
    """``(head, name, words, tail)`` around the first ``${name<op>w}`` of ``word``."""
    start = word.find("${")
    while start >= 0:
        end = _brace_end(word, start + 2)
        if end < 0:
            return None
        found = parameter_word(word[start + 2 : end])
        if found is not None:
            words = [w for c in split_commands(found[1])[0] for w in c.words] or [""]
            return word[:start], found[0], words, word[end + 1 :]
        start = word.find("${", end + 1)
    return None


def _defaults(word: str) -> list[tuple[str, bool]]:
    """The readings of ``word`` with each ``${X:-w}`` (``-`` ``=`` ``+``, with or without
    ``:``): once as ``${X}`` (its value) and once with each of ``w``'s words in its place
    (the flag says such a word was assumed). Too many readings are refused, not guessed."""
    out: list[tuple[str, bool]] = []
    todo = [(word, False)]
    for _ in range(_MAX_READINGS):
        if not todo:
            return out
        text, assumed = todo.pop()
        found = _first_default(text)
        if found is None:
            out.append((text, assumed))
            continue
        head, name, words, tail = found
        todo.append((head + "${" + name + "}" + tail, assumed))
        todo += [(head + w + tail, True) for w in words]
    raise _Blocked("blocked: too many parameter expansions in one word to check")


def _operands(args: Sequence[str]) -> list[str]:
    """Arguments that are not options (everything after ``--`` is an operand)."""
    out: list[str] = []
    for k, arg in enumerate(args):
        if arg == "--":
            return out + list(args[k + 1 :])
        if not arg.startswith("-") or arg == "-":
            out.append(arg)
    return out


@attrs.define
class _Checker:
    scope: _Scope
    cwd: str | None
    depth: int
    subs_depth: int = 0

    def path(self, word: str) -> tuple[str, bool] | None:
        """Expand ``word`` to a normalised absolute path; the flag says a variable was blanked."""
        blanked = False

        def repl(m: re.Match[str]) -> str:
            nonlocal blanked
            name = m.group(1) if m.group(1) is not None else m.group(2)
            if name == "HOME":
                return self.scope.home
            if name == "PWD" and self.cwd is not None:
                return self.cwd
            blanked = True
            return ""

        if word == "~" or word.startswith("~/"):
            word = self.scope.home + word[1:]
        elif word == "~root" or word.startswith("~root/"):
            word = "/root" + word[5:]
        text = _VARIABLE.sub(repl, word)
        if not text or text.startswith("~"):
            return None
        if not text.startswith("/"):
            if self.cwd is None:
                return None
            text = posixpath.join(self.cwd, text)
        norm = posixpath.normpath(text)
        return ("/" + norm.lstrip("/") if norm.startswith("//") else norm), blanked

    def paths(self, words: Sequence[str]) -> list[tuple[str, bool]]:
        """Every path ``words`` may name: brace expansion, then parameter defaults."""
        out: list[tuple[str, bool]] = []
        for text, assumed in (d for g in words for b in _braces(g) for d in _defaults(b)):
            found = self.path(text)
            if found:
                out.append((found[0], found[1] or assumed))
        return out

    def deny_targets(self, tool: str, words: Sequence[str]) -> None:
        for path, blanked in self.paths(words):
            why = self.scope.protected(path)
            if why:
                empty = " (a variable in it may be empty)" if blanked else ""
                raise _Blocked(f"blocked: {tool} on {path}: {why}{empty}")

    def deny_devices(self, what: str, words: Sequence[str]) -> None:
        for path, _ in self.paths(words):
            if _is_device(path):
                raise _Blocked(f"blocked: {what} onto device {path}")

    def line(self, text: str) -> None:
        if _fork_bomb(text):
            raise _Blocked("blocked: fork bomb (a function or loop that spawns itself)")
        commands, subs = split_commands(text)
        for sub in subs:
            if self.subs_depth >= _MAX_SUBSTITUTION_DEPTH:
                raise _Blocked("blocked: command substitutions nested too deeply")
            inner = _Checker(self.scope, self.cwd, self.depth, self.subs_depth + 1)
            inner.line(sub)
        previous: SimpleCommand | None = None
        for command in commands:
            self.simple(command, previous)
            previous = command

    def nested(self, text: str) -> None:
        if self.depth + 1 > MAX_NESTING:
            raise _Blocked(f"blocked: sh -c/eval nested deeper than {MAX_NESTING} levels")
        _Checker(self.scope, self.cwd, self.depth + 1, self.subs_depth).line(text)

    def simple(self, command: SimpleCommand, previous: SimpleCommand | None) -> None:
        out = [target for op, target in command.redirects if op in _REDIRECT_OUT]
        self.deny_devices("redirection", [t for t in out if not t.isdigit() and t != "-"])
        words = strip_wrappers(command.words, split=lambda s: split_commands(s)[0])
        if not words:
            return
        name, args = posixpath.basename(words[0]), words[1:]
        if name in _SHELLS or name == "eval" or name == "su":
            self.shell(name, args, command, previous)
        elif name in ("cd", "pushd"):
            self.change_dir(args)
        else:
            self.tool(name, args)

    def shell(
        self, name: str, args: Sequence[str], command: SimpleCommand, prev: SimpleCommand | None
    ) -> None:
        script = " ".join(args) if name == "eval" else shell_script(name, args)
        if script is not None:
            self.nested(script)
            return
        if name == "su":
            return
        texts = list(command.stdin_texts)
        if command.after_pipe and prev and prev.words[:1] in (("echo",), ("printf",)):
            texts.append(" ".join(prev.words[1:]))
        for text in texts:
            self.nested(text)

    def change_dir(self, args: Sequence[str]) -> None:
        rest = [a for a in args if a not in ("-P", "-L", "-e", "-@")]
        if not rest:
            self.cwd = self.scope.home
            return
        found = self.path(rest[0]) if rest[0] != "-" else None
        self.cwd = found[0] if found and not found[1] else None

    def tool(self, name: str, args: Sequence[str]) -> None:
        if name.startswith("mkfs") or name in _FORMATTERS:
            raise _Blocked(f"blocked: {name} formats a filesystem")
        if name == "blkdiscard":
            raise _Blocked("blocked: blkdiscard discards every block of a device")
        if name == "wipefs" and any(
            a == "--all" or (a.startswith("-") and not a.startswith("--") and "a" in a)
            for a in args
        ):
            raise _Blocked("blocked: wipefs -a erases filesystem signatures")
        if name == "dd":
            self.deny_devices("dd", [a[3:] for a in args if a.startswith("of=")])
        elif name in _DEVICE_WRITERS:
            self.deny_devices(name, _operands(args))
        elif name in _DELETERS:
            self.deny_targets(name, _operands(args))
        elif name == "mv":
            self.deny_targets(name, _operands(args)[:-1])
        elif name == "rsync" and any(a.startswith("--delete") for a in args):
            self.deny_targets("rsync --delete", _operands(args)[-1:])
        elif name == "find":
            self.find(args)

    def find(self, args: Sequence[str]) -> None:
        execs = [args[k + 1] for k, a in enumerate(args[:-1]) if a in ("-exec", "-execdir", "-ok")]
        destructive = "-delete" in args or any(
            posixpath.basename(e) in _DESTRUCTIVE_EXEC for e in execs
        )
        if not destructive:
            return
        k = 0
        while k < len(args) and args[k] in ("-H", "-L", "-P", "-O", "-D"):
            k += 2 if args[k] in ("-O", "-D") else 1
        starts: list[str] = []
        for arg in args[k:]:
            if arg.startswith("-") or arg in ("(", "!", ")"):
                break
            starts.append(arg)
        self.deny_targets("find -delete", starts or ["."])


def guard_command(
    command: str, *, workspace: Path, home: Path, cwd: Path | None = None
) -> str | None:
    """Return why ``command`` is blocked (``"blocked: ..."``) or None when it may be asked.

    ``cwd`` is where the command runs (default: the workspace), for relative paths.
    """
    scope = _Scope(posixpath.normpath(str(workspace)), posixpath.normpath(str(home)))
    start = posixpath.normpath(str(cwd if cwd is not None else workspace))
    try:
        _Checker(scope, start, depth=0).line(command)
    except _Blocked as blocked:
        return str(blocked)
    except RecursionError:
        return "blocked: the command is nested too deeply to check"
    return None
