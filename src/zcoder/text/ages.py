"""How long ago something happened, in one wording for every list (``/sessions``,
``/agents inbox``, ``/agents sent``). Pure.

One rule everywhere, with each unit starting where the smaller one ends: ``72 s ago`` beside
``1 min ago`` read as if the second were the more recent.
"""

from __future__ import annotations

__all__ = ["age"]


def age(seconds: float) -> str:
    """``just now``, ``12 s ago``, ``3 min ago``, ``5 h ago`` or ``2 days ago``."""
    if seconds < 1:
        return "just now"
    if seconds < 60:
        return f"{int(seconds)} s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 172800:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"
