"""Numbers as settings are written: plain ASCII decimals, nothing Python also accepts.

``int()`` and ``float()`` take ``1_0``, ``+5``, `` 7 ``, ``1e3``, ``inf``, ``nan`` and other
scripts' digits (``٣``); a setting that means something else than it reads must be refused,
so every number read from a flag or the environment goes through here (pure, no imports
beyond ``re``, so ``cli.py`` can use it before anything heavy is loaded).
"""

from __future__ import annotations

import re

__all__ = ["plain_float", "plain_int"]

_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+")


def plain_int(text: str) -> int | None:
    """``text`` as a whole number when it is only ASCII digits, else None."""
    return int(text) if _INT.fullmatch(text) else None


def plain_float(text: str) -> float | None:
    """``text`` as a number when it is ASCII digits with at most one decimal point, else None."""
    return float(text) if _FLOAT.fullmatch(text) else None
