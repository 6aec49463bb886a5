"""The input area draws control characters as the scrollback does. Pure.

Typed or pasted text may hold a bidi override, a C1 control or a tag character; drawn raw,
a U+202E reorders the rest of the line on screen, so what the user reads before pressing
Enter is not what is sent (a Trojan Source confusion). ``ShowControls`` draws each such
character as its token (``<U+202E>``, ``^[``) in the ``ctrl`` style and a tab as four
spaces, by the same rule as ``ui.text.visible``; the buffer keeps the text as typed, and
the cursor moves over a token as over the one character it stands for.
"""

from __future__ import annotations

from bisect import bisect_right

from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.formatted_text.utils import fragment_list_to_text
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput
from prompt_toolkit.layout.utils import explode_text_fragments

from zcoder.ui.text import CTRL_STYLE, TAB, control_display

__all__ = ["ShowControls", "shown_controls"]


def shown_controls(
    fragments: StyleAndTextTuples,
) -> tuple[StyleAndTextTuples, list[int]] | None:
    """``fragments`` (one line) with each control character as its token, and where each
    source character starts on screen (one more entry: the line's end); ``None`` when
    nothing needs to change."""
    text = fragment_list_to_text(fragments)
    if text.isprintable():  # the common case, checked in C
        return None
    out: StyleAndTextTuples = []
    starts: list[int] = []
    pos = 0
    for i, (style, ch, *rest) in enumerate(explode_text_fragments(fragments)):
        starts.append(pos)
        shown = TAB if ch == "\t" else control_display(text, i)
        if shown is None:
            out.append((style, ch, *rest))  # type: ignore[arg-type]
            pos += 1
            continue
        token_style = style if ch == "\t" else f"{style} {CTRL_STYLE}".strip()
        out.append((token_style, shown, *rest))  # type: ignore[arg-type]
        pos += len(shown)
    starts.append(pos)
    return out, starts


class ShowControls(Processor):
    """Draws the input's control characters visibly; the text itself is not changed."""

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        shown = shown_controls(transformation_input.fragments)
        if shown is None:
            return Transformation(transformation_input.fragments)
        fragments, starts = shown
        end = len(starts) - 1

        def source_to_display(i: int) -> int:
            # Past the line's end (the cursor after it, an AfterInput text): one for one.
            return starts[i] if i <= end else starts[end] + i - end

        def display_to_source(d: int) -> int:
            # A column inside a token is the character the token stands for.
            if d >= starts[end]:
                return end + d - starts[end]
            return max(bisect_right(starts, d) - 1, 0)

        return Transformation(fragments, source_to_display, display_to_source)
