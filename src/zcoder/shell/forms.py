"""Two word forms of bash that the lexer reads and the guard judges: ANSI-C strings
(``$'...'``) and parameter expansions with a default (``${X:-word}``). Pure, floor 2.

``ansi_c`` decodes ``$'...'`` as bash does (``\\n``, ``\\x2f``, ``\\057``, ``\\u00e9``,
``\\cA``...; an unknown escape keeps its backslash; a NUL ends the string), so that
``rm -rf $'\\x2f'`` is seen as ``rm -rf /``. ``parameter_word`` splits the body of
``${...}`` into the name and the word it may stand for: ``${X:-w}``, ``${X-w}``,
``${X:=w}``, ``${X=w}``, ``${X:+w}`` and ``${X+w}`` can all become ``w``.
"""

from __future__ import annotations

import re

__all__ = ["ansi_c", "ansi_c_end", "parameter_word"]

_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip
_HEX = "0123456789abcdefABCDEF"
_OCTAL = "01234567"
# digits bash reads after \x, \u and \U
_WIDTH = {"x": 2, "u": 4, "U": 8}
_PARAMETER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(:?[-=+])(.*)", re.DOTALL)


def _digits(s: str, i: int, allowed: str, most: int) -> str:
    j = i
    while j < len(s) and j - i < most and s[j] in allowed:
        j += 1
    return s[i:j]


def _byte(value: int) -> str:
    """``\\xHH`` and ``\\NNN`` are bytes: above ASCII, the surrogate escape Python gives an
    undecodable byte of an argument (``os.fsdecode``)."""
    return chr(value) if value < 0x80 else chr(0xDC00 + value)


def _escape(s: str, i: int) -> tuple[str, int]:
    """The text of the escape whose letter is at ``s[i]`` (after the backslash)."""
    c = s[i]
    if c in _SIMPLE:
        return _SIMPLE[c], i + 1
    if c in _OCTAL:
        digits = _digits(s, i, _OCTAL, 3)
        return _byte(int(digits, 8) & 0xFF), i + len(digits)
    if c in _WIDTH:
        digits = _digits(s, i + 1, _HEX, _WIDTH[c])
        if not digits:
            return "\\" + c, i + 1
        code = int(digits, 16)
        if c == "x":
            return _byte(code), i + 1 + len(digits)
        return (chr(code) if code <= 0x10FFFF else "\\" + c + digits), i + 1 + len(digits)
    if c == "c" and i + 1 < len(s):
        ctl = s[i + 1]
        return ("\x7f" if ctl == "?" else chr(ord(ctl.upper()) & 0x1F)), i + 2
    return "\\" + c, i + 1


def _closing(s: str, i: int) -> int:
    """The index of the quote closing the ``$'...'`` text that starts at ``s[i]``
    (``len(s)`` if none): like bash, a backslash always takes the next character along."""
    while i < len(s) and s[i] != "'":
        i += 2 if s[i] == "\\" else 1
    return min(i, len(s))


def ansi_c_end(s: str, i: int) -> int:
    """The index after the ``$'...'`` string whose text starts at ``s[i]``."""
    return min(_closing(s, i) + 1, len(s))


def ansi_c(s: str, i: int) -> tuple[str, int]:
    """Decode the ``$'...'`` string whose text starts at ``s[i]`` (after ``$'``); return
    its value and the index after the closing quote."""
    close = _closing(s, i)
    body = s[i:close]
    out: list[str] = []
    k = 0
    while k < len(body):
        if body[k] == "\\" and k + 1 < len(body):
            text, k = _escape(body, k + 1)
        else:
            text, k = body[k], k + 1
        if "\0" in text:  # bash ends the string at a NUL
            break
        out.append(text)
    return "".join(out), min(close + 1, len(s))


def parameter_word(body: str) -> tuple[str, str] | None:
    """``(name, word)`` for ``${name<op>word}`` with a default or alternative word, where
    ``body`` is the text between the braces; None for other forms (``${X}``, ``${#X}``,
    ``${X%pat}``...)."""
    m = _PARAMETER.fullmatch(body)
    if m is None:
        return None
    return m.group(1), m.group(3)
