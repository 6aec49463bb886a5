"""Control characters made visible: the one escaper for plain-text output.

Model, tool, file and peer text is shown to the user; a raw ESC, a bidi override or a line
separator in it could move the cursor, clear the screen or reorder what the user reads (and
so forge a prompt). Every character of Unicode category Cc (C0, DEL, C1), Cf (bidi marks,
zero-width characters), Zl/Zp (line separators), Cs (lone surrogates) or Co (private use)
is written as an escape instead. The interactive UI draws
its own styled tokens (``ui/text.py``) from the same rule, ``is_control``.
"""

from __future__ import annotations

import unicodedata

__all__ = ["escape_controls", "is_control"]

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})


def is_control(ch: str) -> bool:
    """Whether ``ch`` must never reach a terminal raw."""
    return unicodedata.category(ch) in _CONTROL_CATEGORIES


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every control character (except those in ``keep``) as an escape:
    ``\\t``, ``\\n``, ``\\r``, ``\\x1b``, ``\\u202e``."""
    if text.isprintable() and not keep:  # the common case, checked in C
        return text
    out = []
    for ch in text:
        if ch in keep or not is_control(ch):
            out.append(ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)
