"""Canary: the private prompt_toolkit and Pygments names the UI relies on still behave.

If a prompt_toolkit upgrade breaks one of these, this file fails with the name that broke
(pyproject.toml also bounds prompt_toolkit below 3.1): fix ``ui/ptk_compat.py`` only.
"""

from __future__ import annotations

import asyncio
import inspect
import io

import pygments.token  # type: ignore[import-untyped]
from prompt_toolkit.application import Application
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.input.vt100_parser import Vt100Parser
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.output import ColorDepth
from prompt_toolkit.output.vt100 import Vt100_Output
from prompt_toolkit.renderer import print_formatted_text
from prompt_toolkit.styles import Style

from zcoder.ui import ptk_compat


def _output(buffer: io.StringIO) -> Vt100_Output:
    return Vt100_Output(buffer, lambda: Size(rows=24, columns=80))


def test_the_private_names_exist_with_the_signatures_we_call() -> None:
    redraw = inspect.signature(Application._redraw)
    assert list(redraw.parameters) == ["self", "render_as_done"]
    assert list(inspect.signature(Application._request_absolute_cursor_position).parameters) == [
        "self"
    ]
    printer = inspect.signature(print_formatted_text)
    assert list(printer.parameters)[:3] == ["output", "formatted_text", "style"]
    assert "color_depth" in printer.parameters
    assert ptk_compat.TokenType is type(pygments.token.Token)


def test_shift_enter_reads_as_a_newline_key_once_installed() -> None:
    ptk_compat.install_shift_enter()
    ptk_compat.install_shift_enter()  # idempotent
    for sequence in ptk_compat.SHIFT_ENTER_SEQUENCES:
        assert ANSI_SEQUENCES[sequence] == Keys.ControlJ
        keys: list[KeyPress] = []
        parser = Vt100Parser(keys.append)
        parser.feed_and_flush(sequence)
        assert [k.key for k in keys] == [Keys.ControlJ]


def test_write_now_writes_at_once_with_the_style() -> None:
    buffer = io.StringIO()
    output = _output(buffer)
    style = Style.from_dict({"x": "bold"})
    ptk_compat.write_now(output, [("class:x", "hello\n")], style, ColorDepth.DEPTH_8_BIT)
    output.flush()
    assert "hello" in buffer.getvalue()
    assert "\x1b[0;1m" in buffer.getvalue() or "\x1b[1m" in buffer.getvalue()


def test_redraw_now_draws_a_running_app_again() -> None:
    buffer = io.StringIO()
    text = ["first"]
    seen: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with create_pipe_input() as pipe:
            app: Application[None] = Application(
                layout=Layout(Window(FormattedTextControl(lambda: text[0]))),
                input=pipe,
                output=_output(buffer),
            )

            def redraw() -> None:
                text[0] = "second"
                ptk_compat.redraw_now(app)  # synchronous: drawn before it returns
                seen.append(buffer.getvalue())
                app.exit()

            def first_drawn(_: object) -> None:
                if text[0] == "first":
                    loop.call_soon(redraw)

            app.after_render += first_drawn
            await app.run_async()

    asyncio.run(main())
    assert seen and "second" in seen[0]
