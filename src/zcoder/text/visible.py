"""Control characters made visible: the one escaper for plain-text output.

Model, tool, file and peer text is shown to the user; a raw ESC, a bidi override or a line
separator in it could move the cursor, clear the screen or reorder what the user reads (and
so forge a prompt). Every character of Unicode category Cc (C0, DEL, C1), Cf (bidi marks,
zero-width characters), Zl/Zp (line separators), Cs (lone surrogates) or Co (private use)
is written as a visible token instead, in one form everywhere: ``^[`` for a C0 character
(caret notation, ``^?`` for DEL) and ``<U+202E>`` for any other. The interactive UI draws
the same tokens, styled (``ui/text.py``), from the same rule, ``is_control``.
"""

from __future__ import annotations

import unicodedata

__all__ = ["control_token", "escape_controls", "is_control"]

_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})


def is_control(ch: str) -> bool:
    """Whether ``ch`` must never reach a terminal raw."""
    return unicodedata.category(ch) in _CONTROL_CATEGORIES


def control_token(ch: str) -> str:
    """The visible stand-in for the control character ``ch``: ``^[``, ``^I``, ``^?``,
    ``<U+202E>``."""
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every control character (except those in ``keep``) as its
    ``control_token``: a tab is ``^I``, a newline ``^J``, ESC ``^[``."""
    if text.isprintable() and not keep:  # the common case, checked in C
        return text
    out = []
    for ch in text:
        out.append(ch if ch in keep or not is_control(ch) else control_token(ch))
    return "".join(out)
