"""Every use of a private prompt_toolkit or Pygments name, in one place.

The app prints finished transcript lines above itself without prompt_toolkit's
``run_in_terminal`` (which switches the terminal to cooked mode, where keys typed meanwhile
would echo into the scrollback and ^C/^D/^U be taken by the tty driver). That needs three
names prompt_toolkit does not promise: the renderer's immediate printer, and the
application's cursor-position request and synchronous redraw. Shift+Enter needs two
entries in its input parser's escape-sequence table, and the Markdown highlighter types
Pygments' token class. pyproject.toml bounds prompt_toolkit below 3.1, and
tests/ui/test_ptk_compat.py fails loudly when an upgrade removes or changes any of them.
"""

from __future__ import annotations

from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.keys import Keys
from prompt_toolkit.output import ColorDepth, Output
from prompt_toolkit.renderer import print_formatted_text as _renderer_print
from prompt_toolkit.styles import BaseStyle
from pygments.token import _TokenType  # type: ignore[import-untyped]

__all__ = [
    "SHIFT_ENTER_SEQUENCES",
    "TokenType",
    "install_shift_enter",
    "redraw_now",
    "write_now",
]

TokenType = _TokenType

# Shift+Enter as terminals with extended keys send it (xterm modifyOtherKeys, CSI u):
# prompt_toolkit maps it to plain Enter; we want a newline, like Alt+Enter and Ctrl-J.
SHIFT_ENTER_SEQUENCES = ("\x1b[27;2;13~", "\x1b[13;2u")


def install_shift_enter() -> None:
    """Read Shift+Enter as Ctrl-J (a newline). Called when the app is built, not at import,
    so importing the UI changes nothing in prompt_toolkit; idempotent."""
    for sequence in SHIFT_ENTER_SEQUENCES:
        ANSI_SEQUENCES[sequence] = Keys.ControlJ


def write_now(
    output: Output, fragments: StyleAndTextTuples, style: BaseStyle, color_depth: ColorDepth
) -> None:
    """Write ``fragments`` to ``output`` at once (the public shortcut of the same name would
    defer to ``run_in_terminal`` whenever an application is running)."""
    _renderer_print(output, fragments, style, color_depth=color_depth)


def redraw_now(app: Application[Any]) -> None:
    """After printing above the app: learn where the cursor is and draw the app again."""
    app._request_absolute_cursor_position()
    app._redraw()
