"""A small POSIX-shell lexer for the command guard: simple commands, never execution.

It splits a command line the way a shell would for *reading* it: quotes and backslashes
(``'...'``, ``"..."``, ``\\x``), operators (``;`` ``&&`` ``||`` ``|`` ``&`` newlines, parentheses),
redirections (``>`` ``>>`` ``&>`` ``2>`` ...), comments, here-documents, and the bodies of
``$(...)``, backticks and ``<(...)`` (returned separately so the guard can check them too).
It never expands anything: words keep ``$VAR``, ``${X:-w}`` and ``~`` as written; the one
exception is an ANSI-C string (``$'\\x2f'``), which is a quoting form and is decoded
(``$"..."`` reads like ``"..."``). Unterminated quotes or
parentheses take the rest of the text, so a malformed line still yields every word in it.
Pure, floor 2.
"""

from __future__ import annotations

import attrs

from zcoder.shell.forms import ansi_c, ansi_c_end

__all__ = ["SimpleCommand", "split_commands"]

_OPS = sorted(
    [
        "&>>", "&>", ">>", ">|", ">&", "<&", "<>", "<<<", "<<-", "<<",
        "&&", "||", ";;", "|&", ";&", ">", "<", "|", "&", ";", "(", ")",
    ],
    key=len,
    reverse=True,
)  # fmt: skip
_REDIRECTS = frozenset({"&>>", "&>", ">>", ">|", ">&", "<&", "<>", "<<<", ">", "<"})
_OP_CHARS = frozenset(";&|<>()")
_BREAK = frozenset(" \t\n") | _OP_CHARS


@attrs.frozen
class SimpleCommand:
    """One simple command: its words, output/input redirections and text fed to its stdin.

    ``stdin_texts`` holds here-document bodies and here-strings; ``after_pipe`` says the
    command reads the previous command's output (``a | b``).
    """

    words: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    stdin_texts: tuple[str, ...] = ()
    after_pipe: bool = False


def _balanced(s: str, i: int, close: str) -> tuple[str, int]:
    """Read from ``s[i]`` to the bracket matching an already-consumed opener."""
    opener = {")": "(", "}": "{"}[close]
    depth, j = 1, i
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "$" and s[j + 1 : j + 2] == "'":  # its \' does not end it
            j = ansi_c_end(s, j + 2)
            continue
        if c == "'":
            end = s.find("'", j + 1)
            j = len(s) if end < 0 else end + 1
            continue
        if c == '"':
            j = _dquote(s, j + 1, [], [])
            continue
        if c == opener:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return s[i:j], j + 1
        j += 1
    return s[i:], len(s)


def _backtick(s: str, i: int) -> tuple[str, int]:
    out, j = [], i
    while j < len(s) and s[j] != "`":
        if s[j] == "\\" and j + 1 < len(s):
            out.append(s[j + 1])
            j += 2
            continue
        out.append(s[j])
        j += 1
    return "".join(out), j + 1


def _dollar(s: str, i: int, word: list[str], subs: list[str]) -> int:
    """Handle ``$`` at ``s[i]``: substitutions go to ``subs``; the raw text stays in the word."""
    nxt = s[i + 1 : i + 2]
    if nxt == "(":
        inner, end = _balanced(s, i + 2, ")")
        subs.append(inner)
    elif nxt == "{":
        inner, end = _balanced(s, i + 2, "}")
    else:
        word.append("$")
        return i + 1
    word.append(s[i:end])
    return end


def _dquote(s: str, i: int, word: list[str], subs: list[str]) -> int:
    """Read a double-quoted string starting after its quote; return the index after it."""
    while i < len(s) and s[i] != '"':
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            word.append(nxt if nxt in '$`"\\' else ("" if nxt == "\n" else c + nxt))
            i += 2
        elif c == "$":
            i = _dollar(s, i, word, subs)
        elif c == "`":
            inner, i = _backtick(s, i + 1)
            subs.append(inner)
            word.append("`" + inner + "`")
        else:
            word.append(c)
            i += 1
    return i + 1


def _substitutions(text: str, subs: list[str]) -> None:
    """Collect the ``$(...)`` and backtick bodies of an expanded here-document."""
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "$":
            i = _dollar(text, i, [], subs)
        elif text[i] == "`":
            inner, i = _backtick(text, i + 1)
            subs.append(inner)
        else:
            i += 1


@attrs.define
class _Lexer:
    s: str
    tokens: list[tuple[str, str]] = attrs.Factory(list)  # ("word"|"op"|"heredoc", text)
    subs: list[str] = attrs.Factory(list)
    pending: list[tuple[int, str, bool, bool]] = attrs.Factory(list)  # slot, delim, <<-, expands
    word: list[str] = attrs.Factory(list)
    in_word: bool = False

    def flush(self) -> None:
        if self.in_word:
            self.tokens.append(("word", "".join(self.word)))
        self.word, self.in_word = [], False

    def run(self) -> None:
        s, i = self.s, 0
        while i < len(s):
            i = self.step(s, i)
        self.flush()

    def step(self, s: str, i: int) -> int:
        c = s[i]
        if c in " \t":
            self.flush()
            return i + 1
        if c == "\n":
            self.flush()
            self.tokens.append(("op", "\n"))
            return self.heredocs(i + 1)
        if c == "#" and not self.in_word:
            end = s.find("\n", i)
            return len(s) if end < 0 else end
        if c in "<>" and s[i + 1 : i + 2] == "(":
            inner, end = _balanced(s, i + 2, ")")
            self.subs.append(inner)
            self.word.append("/dev/fd/63")
            self.in_word = True
            return end
        if c in _OP_CHARS:
            return self.operator(s, i)
        self.in_word = True
        if c == "\\":
            self.word.append(s[i + 1 : i + 2] if s[i + 1 : i + 2] != "\n" else "")
            return i + 2
        if c == "'":
            end = s.find("'", i + 1)
            end = len(s) if end < 0 else end
            self.word.append(s[i + 1 : end])
            return end + 1
        if c == '"':
            return _dquote(s, i + 1, self.word, self.subs)
        if c == "$" and s[i + 1 : i + 2] == "'":
            text, end = ansi_c(s, i + 2)
            self.word.append(text)
            return end
        if c == "$" and s[i + 1 : i + 2] == '"':  # a translated string: the locale's text
            return _dquote(s, i + 2, self.word, self.subs)
        if c == "$":
            return _dollar(s, i, self.word, self.subs)
        if c == "`":
            inner, end = _backtick(s, i + 1)
            self.subs.append(inner)
            self.word.append("`" + inner + "`")
            return end
        self.word.append(c)
        return i + 1

    def operator(self, s: str, i: int) -> int:
        op = next(o for o in _OPS if s.startswith(o, i))
        if op[0] in "<>" and self.in_word and "".join(self.word).isdigit():
            self.word, self.in_word = [], False  # "2>" : the digits name a descriptor
        self.flush()
        i += len(op)
        if op not in ("<<", "<<-"):
            self.tokens.append(("op", op))
            return i
        while i < len(s) and s[i] in " \t":
            i += 1
        start, delim = i, []
        while i < len(s) and s[i] not in _BREAK:
            if s[i] not in "'\"\\":
                delim.append(s[i])
            i += 1
        expands = len(delim) == i - start  # an unquoted delimiter: the body is expanded
        self.pending.append((len(self.tokens), "".join(delim), op == "<<-", expands))
        self.tokens.append(("heredoc", ""))
        return i

    def heredocs(self, i: int) -> int:
        """At a newline: the pending here-document bodies follow, one after another."""
        for slot, delim, strip_tabs, expands in self.pending:
            body: list[str] = []
            while i < len(self.s):
                end = self.s.find("\n", i)
                end = len(self.s) if end < 0 else end
                line = self.s[i:end]
                i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    break
                body.append(line)
            self.tokens[slot] = ("heredoc", "\n".join(body))
            if expands:
                _substitutions("\n".join(body), self.subs)
        self.pending.clear()
        return min(i, len(self.s))


def _assemble(tokens: list[tuple[str, str]]) -> list[SimpleCommand]:
    commands: list[SimpleCommand] = []
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    stdin: list[str] = []
    after_pipe = False

    def finish() -> None:
        if words or redirects or stdin:
            commands.append(SimpleCommand(tuple(words), tuple(redirects), tuple(stdin), after_pipe))
        words.clear()
        redirects.clear()
        stdin.clear()

    k = 0
    while k < len(tokens):
        kind, text = tokens[k]
        k += 1
        if kind == "heredoc":
            stdin.append(text)
        elif kind == "word":
            words.append(text)
        elif text in _REDIRECTS:
            has_target = k < len(tokens) and tokens[k][0] == "word"
            target = tokens[k][1] if has_target else ""
            k += has_target
            if text == "<<<":
                stdin.append(target)
            else:
                redirects.append((text, target))
        else:
            finish()
            after_pipe = text in ("|", "|&")
    finish()
    return commands


def split_commands(text: str) -> tuple[list[SimpleCommand], list[str]]:
    """Return the simple commands of ``text`` and the bodies of its command substitutions."""
    lexer = _Lexer(text)
    lexer.run()
    return _assemble(lexer.tokens), lexer.subs
