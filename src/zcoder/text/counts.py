"""A number with its noun, singular for one (``1 token``, ``4,096 tokens``). Pure.

Every count a user reads goes through here: ``about 1 tokens`` reads as a bug, whatever the
number was.
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str = "") -> str:
    """``n`` with thousands separators, then ``noun`` (``plural``, else ``noun + "s"``,
    unless ``n`` is 1)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
