from __future__ import annotations

import pytest

from zcoder.text.visible import escape_controls, is_control


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain ü 🎉 text", "plain ü 🎉 text"),
        ("a\x1b[2Jb", "a^[[2Jb"),
        ("tab\there\nnext\rx", "tab^Ihere^Jnext^Mx"),
        ("\x00\x07\x7f\x9b", "^@^G^?<U+009B>"),
        ("bidi \u202eevil\u2066", "bidi <U+202E>evil<U+2066>"),
        ("zero\u200bwidth\ufeff", "zero<U+200B>width<U+FEFF>"),
        ("line\u2028para\u2029", "line<U+2028>para<U+2029>"),
        ("private \ue000", "private <U+E000>"),
        ("lone \ud800", "lone <U+D800>"),
        ("", ""),
    ],
)
def test_escape_controls(raw: str, shown: str) -> None:
    assert escape_controls(raw) == shown


def test_keep_lets_chosen_characters_through() -> None:
    assert escape_controls("tab\there\nnext\x1b", keep="\n\t") == "tab\there\nnext^["


def test_nothing_escaped_is_left_raw() -> None:
    sample = "".join(map(chr, range(0x3000))) + "\u202e\u2066\ufeff"
    assert not any(is_control(ch) for ch in escape_controls(sample))


def test_ordinary_spaces_and_marks_are_not_controls() -> None:
    assert not any(is_control(ch) for ch in " \u00a0\u0301é中")


def test_plain_text_and_the_ui_show_controls_the_same_way() -> None:
    """One form everywhere: what ``zcoder agents`` prints is what the transcript draws."""
    from zcoder.ui.text import visible_text

    controls = [chr(c) for c in range(0x3000) if is_control(chr(c)) and chr(c) not in "\t\n"]
    for ch in [*controls, "\u202e", "\ufeff", "\ud800"]:
        assert escape_controls(ch) == visible_text(ch), repr(ch)
