"""The agent name: the friendly label ``--agent-name`` puts in the manifest's ``project``.

Pure, and light (``re`` only): ``config.py`` checks a name before anything else starts. A
name is typed after ``@`` in ``/send @name`` and shown in other users' tables, so it is held
to a grammar no shell, terminal or ``/send`` parser can misread: a letter or digit, then up
to 63 letters, digits, ``.``, ``_`` or ``-``.
"""

from __future__ import annotations

import re

__all__ = ["AGENT_NAME_RULE", "MAX_AGENT_NAME_CHARS", "agent_name_problem", "is_agent_name"]

MAX_AGENT_NAME_CHARS = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
AGENT_NAME_RULE = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def is_agent_name(text: str) -> bool:
    """Whether ``text`` is in the agent-name grammar (ASCII only: ``[A-Za-z0-9]`` means it)."""
    return text.isascii() and _NAME.fullmatch(text) is not None


def agent_name_problem(text: str) -> str:
    """Why ``text`` cannot be an agent name (``""`` when it can), one phrase for an error."""
    if is_agent_name(text):
        return ""
    return f"{text!r} is not an agent name: use {AGENT_NAME_RULE}"
