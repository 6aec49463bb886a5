"""Control characters made visible: the one escaper for plain-text output.

Model, tool, file and peer text is shown to the user; a raw ESC, a bidi override or a line
separator in it could move the cursor, clear the screen or reorder what the user reads (and
so forge a prompt). Every character of Unicode category Cc (C0, DEL, C1), Cf (bidi marks,
zero-width characters), Zl/Zp (line separators), Cs (lone surrogates) or Co (private use)
is written as a visible token instead, in one form everywhere: ``^[`` for a C0 character
(caret notation, ``^?`` for DEL) and ``<U+202E>`` for any other. The interactive UI draws
the same tokens, styled (``ui/text.py``), from the same rule, ``control_at``.

One exception, so that emoji read as typed: a zero-width joiner (U+200D) between two emoji
(``👩‍💻``, ``🏳️‍🌈``: an emoji, maybe a variation selector or skin tone, the joiner, an emoji)
is shown as it is; anywhere else it is escaped. Variation selectors are marks, not controls,
and are never escaped. Bidi controls, C0/C1 and the invisible tag characters stay escaped
everywhere, inside emoji too.
"""

from __future__ import annotations

import unicodedata

__all__ = ["control_at", "control_token", "escape_controls", "is_control", "is_emoji"]

_CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
_ZWJ = "\u200d"
_EMOJI_TRAIL = frozenset("\ufe0e\ufe0f")  # text and emoji presentation selectors
# A superset of Unicode's Extended_Pictographic (emoji-data.txt), by blocks: a joiner
# between two of these is shown as it is. Unassigned code points in the emoji blocks count,
# so newer emoji than this Python's Unicode tables still join.
_EMOJI_RANGES = (
    (0x00A9, 0x00A9),
    (0x00AE, 0x00AE),
    (0x203C, 0x203C),
    (0x2049, 0x2049),
    (0x2122, 0x2122),
    (0x2139, 0x2139),
    (0x2194, 0x21AA),
    (0x2318, 0x23FF),
    (0x24C2, 0x24C2),
    (0x25AA, 0x27BF),
    (0x2934, 0x2935),
    (0x2B05, 0x2B55),
    (0x3030, 0x3030),
    (0x303D, 0x303D),
    (0x3297, 0x3299),
    (0x1F000, 0x1FAFF),
    (0x1FC00, 0x1FFFD),
)


def is_control(ch: str) -> bool:
    """Whether ``ch`` must never reach a terminal raw."""
    return unicodedata.category(ch) in _CONTROL_CATEGORIES


def is_emoji(ch: str) -> bool:
    """Whether ``ch`` is an emoji (Extended_Pictographic, skin tones included), roughly."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _EMOJI_RANGES)


def _joins_emoji(text: str, i: int) -> bool:
    """Whether the joiner at ``text[i]`` stands between two emoji."""
    before = i - 1
    while before >= 0 and text[before] in _EMOJI_TRAIL:
        before -= 1
    return before >= 0 and is_emoji(text[before]) and i + 1 < len(text) and is_emoji(text[i + 1])


def control_at(text: str, i: int) -> bool:
    """Whether ``text[i]`` must be escaped: a control character, except a joiner inside an
    emoji sequence."""
    ch = text[i]
    return is_control(ch) and not (ch == _ZWJ and _joins_emoji(text, i))


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
    for i, ch in enumerate(text):
        out.append(ch if ch in keep or not control_at(text, i) else control_token(ch))
    return "".join(out)
