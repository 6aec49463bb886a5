from __future__ import annotations

import pytest

from zcoder.text.visible import escape_controls, is_control, is_emoji


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


def test_emoji_keep_their_joiners_and_selectors() -> None:
    for emoji in ("👩‍💻", "🏳️‍🌈", "👩🏽‍💻", "❤️‍🔥", "🧑‍🤝‍🧑", "1️⃣", "✌︎"):
        assert escape_controls(f"ok {emoji}!") == f"ok {emoji}!"


def test_joiners_elsewhere_and_forging_characters_stay_escaped() -> None:
    assert escape_controls("a\u200db") == "a<U+200D>b"
    assert escape_controls("👩\u200d") == "👩<U+200D>"
    assert escape_controls("\u200d💻") == "<U+200D>💻"
    assert escape_controls("👩\u202e\u200d💻") == "👩<U+202E><U+200D>💻"
    assert escape_controls("👩\u200d\u2066💻") == "👩<U+200D><U+2066>💻"
    assert escape_controls("💻\u202a\u202b\u202c\u202d\u2067\u2068\u2069\u200e\u200f") == (
        "💻<U+202A><U+202B><U+202C><U+202D><U+2067><U+2068><U+2069><U+200E><U+200F>"
    )
    assert escape_controls("🙂\x1b[2J\x9b") == "🙂^[[2J<U+009B>"
    # tag characters (which can hide text) stay escaped, also after a flag
    assert escape_controls("🏴\U000e0067\U000e007f") == "🏴<U+E0067><U+E007F>"


def test_the_emoji_ranges_cover_extended_pictographic() -> None:
    regex = pytest.importorskip("regex")
    pictographic = regex.compile(r"\p{Extended_Pictographic}|\p{Emoji_Modifier}")
    missing = [
        hex(code)
        for code in range(0x110000)
        if not 0xD800 <= code < 0xE000 and pictographic.match(chr(code)) and not is_emoji(chr(code))
    ]
    assert missing == []
