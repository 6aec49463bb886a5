"""The colour scheme: ANSI palette names only, so the terminal's own theme decides.

With ``NO_COLOR`` set the app runs at 1-bit colour depth (no colours; bold, italic and
reverse stay); the role markers in ``render.py`` keep roles apart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from prompt_toolkit.output import ColorDepth
from prompt_toolkit.styles import Style

__all__ = ["STYLE", "color_depth"]

STYLE = Style.from_dict(
    {
        "ctrl": "reverse",
        "dim": "ansibrightblack",
        "user": "bold",
        "user.mark": "bold ansicyan",
        "assistant.mark": "bold ansigreen",
        "thinking": "ansibrightblack italic",
        "system": "ansibrightblack",
        "error": "bold ansired",
        "relay": "ansimagenta",
        "relay.text": "",
        "tool.name": "bold",
        "tool.target": "",
        "tool.summary": "ansibrightblack",
        "tool.pending": "ansibrightblack",
        "tool.running": "ansiyellow",
        "tool.ok": "ansigreen",
        "tool.failed": "ansired",
        "tool.undelivered": "bold ansired",
        "tool.reason": "ansired",
        "tool.denied": "ansiyellow",
        "tool.interrupted": "ansibrightblack",
        "diff.add": "ansigreen",
        "diff.del": "ansired",
        "diff.hunk": "ansicyan",
        "diff.file": "bold",
        "diff.context": "",
        "md.h1": "bold underline",
        "md.h2": "bold",
        "md.h3": "bold italic",
        "md.strong": "bold",
        "md.em": "italic",
        "md.code": "ansicyan",
        "md.link": "underline",
        "md.url": "ansibrightblack",
        "md.bullet": "ansicyan",
        "md.quote": "italic ansibrightblack",
        "md.rule": "ansibrightblack",
        "md.fence": "ansibrightblack",
        "code": "",
        "code.comment": "italic ansibrightblack",
        "code.keyword": "bold ansiblue",
        "code.builtin": "ansimagenta",
        "code.name": "ansiyellow",
        "code.string": "ansigreen",
        "code.number": "ansicyan",
        "prompt": "bold ansicyan",
        "approval": "bold",
        "approval.frame": "ansiyellow",
        "approval.text": "bold",
        "approval.keys": "bold ansicyan",
        "approval.hint": "ansibrightblack",
        "status": "reverse",
        "status.ready": "reverse bold ansigreen",
        "status.busy": "reverse bold ansiyellow",
        "status.error": "reverse bold ansired",
        "status.approval": "reverse bold ansimagenta",
        "status.granted": "reverse bold ansimagenta",
        "status.stopped": "reverse bold ansimagenta",
    }
)


def color_depth(env: Mapping[str, str] | None = None) -> ColorDepth | None:
    """1-bit when ``NO_COLOR`` is set to anything (no-color.org), else the default."""
    env = os.environ if env is None else env
    return ColorDepth.DEPTH_1_BIT if env.get("NO_COLOR") else None
