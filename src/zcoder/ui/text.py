"""Untrusted text made safe to show: control characters drawn visibly, tabs expanded.

Model replies, tool output, file contents and relayed messages may carry escape sequences
or invisible format characters; written raw they could move the cursor, recolour the screen
or forge an approval question. Every such character is drawn as a visible token (``^[``,
``<U+202E>``) in the ``ctrl`` style instead. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zcoder.text.flat import model_file_name
from zcoder.text.flat import one_line as flat
from zcoder.text.visible import control_at, control_token

if TYPE_CHECKING:  # the UI toolkit only for types: the relay's texts load without it
    from prompt_toolkit.formatted_text import StyleAndTextTuples

__all__ = [
    "CTRL_STYLE",
    "TAB",
    "control_display",
    "one_line",
    "shorten",
    "visible",
    "visible_text",
]

CTRL_STYLE = "class:ctrl"
TAB = "    "  # how a tab is drawn: the same four columns wherever it ends up


def control_display(text: str, i: int) -> str | None:
    """The visible stand-in for ``text[i]``, or ``None`` when it is safe as it is (a
    newline is a line break, not a character to show)."""
    if text[i] == "\n" or not control_at(text, i):
        return None
    return control_token(text[i])


def visible(text: str, style: str = "") -> StyleAndTextTuples:
    """``text`` as fragments in ``style``; control characters become ``ctrl`` tokens."""
    text = text.replace("\r\n", "\n").replace("\t", TAB)
    if text.replace("\n", "").isprintable():  # the common case, checked in C
        return [(style, text)] if text else []
    out: StyleAndTextTuples = []
    run: list[str] = []
    for i, ch in enumerate(text):
        token = control_display(text, i)
        if token is None:
            run.append(ch)
            continue
        if run:
            out.append((style, "".join(run)))
            run = []
        out.append((f"{style} {CTRL_STYLE}".strip(), token))
    if run:
        out.append((style, "".join(run)))
    return out


def visible_text(text: str) -> str:
    """``visible`` as a plain string (for places that take no styles)."""
    return "".join(t for _, t, *_ in visible(text))


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) folded to single spaces, made visible."""
    return visible_text(flat(text))


def model_label(name: str) -> str:
    """How a model is named on screen: a model file's name without its directories.

    llama.cpp names the model it serves by the path it was started with (``/opt/models/
    SmolLM2-135M-Instruct.Q4_1.gguf``), which would fill the status bar; the request keeps
    sending the full name."""
    return one_line(model_file_name(name))


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when it was longer."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[: max(width, 0)]
    return text[: width - 1] + "…"
