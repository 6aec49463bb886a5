"""The input area draws control characters visibly, and keeps the text as typed."""

from __future__ import annotations

import asyncio

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import to_plain_text
from prompt_toolkit.layout.controls import BufferControl, UIContent
from prompt_toolkit.layout.processors import Transformation, TransformationInput

from zcoder.ui.input_controls import ShowControls, shown_controls
from zcoder.ui.text import CTRL_STYLE, visible_text

RLO = "\u202e"


def draw(control: BufferControl, width: int = 40, height: int = 5) -> UIContent:
    """What the control draws (it loads the buffer's history as a task: needs a loop)."""

    async def create() -> UIContent:
        return control.create_content(width, height)

    return asyncio.run(create())


def apply(line: str, style: str = "class:x") -> Transformation:
    document = Document(line)
    ti = TransformationInput(
        BufferControl(Buffer(document=document)), document, 0, lambda i: i, [(style, line)], 80, 1
    )
    return ShowControls().apply_transformation(ti)


def test_a_bidi_override_is_drawn_as_its_token_in_the_ctrl_style() -> None:
    t = apply(f"ab{RLO}cd")
    assert to_plain_text(t.fragments) == "ab<U+202E>cd"
    assert ("class:x " + CTRL_STYLE, "<U+202E>") in t.fragments
    assert [t.source_to_display(i) for i in range(6)] == [0, 1, 2, 10, 11, 12]
    # Every column of the token is the one character it stands for.
    assert [t.display_to_source(d) for d in (0, 1, 2, 5, 9, 10, 11, 12, 13)] == [
        0, 1, 2, 2, 2, 3, 4, 5, 6
    ]  # fmt: skip


def test_the_input_shows_what_the_scrollback_will_show() -> None:
    for line in (
        "me 👩\u200d💻 at work",  # an emoji sequence: kept as typed
        "flag 🏴\U000e0067\U000e0062\U000e007f done",  # tag characters: escaped inside emoji
        "a\u200db",  # a joiner outside emoji
        "x\u2066y\u2069z \u200e\u200f",  # isolates and marks
        "esc\x1b[2J c1\x85 del\x7f",  # C0, C1, DEL
        "tab\there",
    ):
        shown = shown_controls([("", line)])
        text = line if shown is None else to_plain_text(shown[0])
        assert text == visible_text(line), line
    assert shown_controls([("", "plain text, é and 日本")]) is None


def test_a_tab_is_four_plain_spaces() -> None:
    shown = shown_controls([("class:x", "a\tb")])
    assert shown is not None
    assert shown == ([("class:x", "a"), ("class:x", "    "), ("class:x", "b")], [0, 1, 5, 6])


def test_the_cursor_sits_after_the_token_and_the_buffer_keeps_the_text() -> None:
    buffer = Buffer(multiline=True)
    buffer.insert_text(f"x\n12{RLO}34")
    control = BufferControl(buffer, input_processors=[ShowControls()])
    content = draw(control)
    assert to_plain_text(content.get_line(1)) == "12<U+202E>34 "  # a cell for the cursor
    assert content.cursor_position.y == 1 and content.cursor_position.x == 12
    buffer.cursor_position -= 2  # before "3": just after the token
    assert draw(control).cursor_position.x == 10
    buffer.cursor_position -= 1  # on the override itself: the token's first column
    assert draw(control).cursor_position.x == 2
    assert buffer.text == f"x\n12{RLO}34"  # what is sent is what was typed


def test_a_selection_is_highlighted_over_the_whole_token() -> None:
    buffer = Buffer()
    buffer.insert_text(f"a{RLO}b")
    buffer.cursor_position = 1
    buffer.start_selection()
    buffer.cursor_position = 3
    content = draw(BufferControl(buffer, input_processors=[ShowControls()]), height=1)
    line = content.get_line(0)
    assert to_plain_text(line) == "a<U+202E>b "
    token = [style for style, text, *_ in line if text == "<U+202E>"]
    assert token and "class:selected" in token[0] and CTRL_STYLE in token[0]
