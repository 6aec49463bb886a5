"""Assistant Markdown to styled fragments: headings, lists, quotes, emphasis, code.

A small line-oriented renderer for what models actually write, not a CommonMark engine:
fenced code is highlighted with Pygments (token classes mapped to the terminal's own ANSI
palette, so it reads on light and dark backgrounds alike); anything unrecognised stays as
written. All text passes through ``visible`` first. Pure.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from prompt_toolkit.formatted_text import StyleAndTextTuples
from pygments.token import Token  # type: ignore[import-untyped]

from zcoder.ui.ptk_compat import TokenType
from zcoder.ui.text import visible

if TYPE_CHECKING:
    from pygments.lexer import Lexer  # type: ignore[import-untyped]

__all__ = ["render_markdown", "split_blocks"]

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)([-*+])\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)(\d{1,3}[.)])\s+(.*)$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_INLINE = re.compile(
    r"(`+)(?P<code>.+?)\1"
    r"|\*\*(?P<strong>[^*\n]+?)\*\*"
    # Not inside a word (``mcp__demo__add``), and not a lone identifier: ``__init__`` is a
    # dunder name in a coding agent's prose far more often than bold.
    r"|(?<![\w_])__(?!\w+__(?![\w_]))(?P<strong2>[^_\s][^_\n]*?)__(?![\w_])"
    r"|(?<![\w*])\*(?P<em>[^*\s][^*\n]*?)\*(?!\w)"
    r"|(?<![\w_])_(?P<em2>[^_\s][^_\n]*?)_(?!\w)"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>[^)\s]+)\)"
)
# Pygments token families -> our style classes (defined in ui/style.py).
_TOKEN_CLASSES = (
    (Token.Comment, "class:code.comment"),
    (Token.Keyword, "class:code.keyword"),
    (Token.Name.Builtin, "class:code.builtin"),
    (Token.Name.Function, "class:code.name"),
    (Token.Name.Class, "class:code.name"),
    (Token.Name.Decorator, "class:code.builtin"),
    (Token.Literal.String, "class:code.string"),
    (Token.Literal.Number, "class:code.number"),
    (Token.Operator.Word, "class:code.keyword"),
    (Token.Generic.Inserted, "class:diff.add"),
    (Token.Generic.Deleted, "class:diff.del"),
    (Token.Generic.Subheading, "class:diff.hunk"),
)


def _inline(text: str, base: str) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.extend(visible(text[pos : m.start()], base))
        if m.group("code") is not None:
            out.extend(visible(m.group("code"), f"{base} class:md.code"))
        elif m.group("strong") or m.group("strong2"):
            out.extend(visible(m.group("strong") or m.group("strong2"), f"{base} class:md.strong"))
        elif m.group("em") or m.group("em2"):
            out.extend(visible(m.group("em") or m.group("em2"), f"{base} class:md.em"))
        else:
            out.extend(visible(m.group("label"), f"{base} class:md.link"))
            out.extend(visible(f" ({m.group('url')})", f"{base} class:md.url"))
        pos = m.end()
    out.extend(visible(text[pos:], base))
    return out


def _lexer(language: str) -> Lexer:
    # Imported at the first code block: Pygments' lexer table and plugin lookup cost start-up
    # time and memory, and the first screen shows no code (docs/architecture.rst).
    from pygments.lexers import TextLexer, get_lexer_by_name  # type: ignore[import-untyped]
    from pygments.util import ClassNotFound  # type: ignore[import-untyped]

    try:
        return get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        return TextLexer()


def _token_class(token: TokenType) -> str:
    for family, cls in _TOKEN_CLASSES:
        if token in family:
            return cls
    return "class:code"


def _code_block(lines: list[str], language: str) -> StyleAndTextTuples:
    out: StyleAndTextTuples = [("class:md.fence", f"  ┌─ {language or 'code'}\n")]
    source = "\n".join(lines) + "\n"
    line: StyleAndTextTuples = [("class:md.fence", "  │ ")]
    for token, value in _lexer(language).get_tokens(source):
        cls = _token_class(token)
        for i, part in enumerate(value.split("\n")):
            if i:
                out.extend(line)
                out.append(("", "\n"))
                line = [("class:md.fence", "  │ ")]
            if part:
                line.extend(visible(part, cls))
    out.append(("class:md.fence", "  └─\n"))
    return out


def _line(line: str) -> StyleAndTextTuples:
    if m := _HEADING.match(line):
        level = len(m.group(1))
        return _inline(m.group(2), f"class:md.h{min(level, 3)}")
    if _RULE.match(line):
        return [("class:md.rule", "─" * 40)]
    if m := _BULLET.match(line):
        return [("class:md.bullet", f"{m.group(1)}• "), *_inline(m.group(3), "")]
    if m := _NUMBERED.match(line):
        return [("class:md.bullet", f"{m.group(1)}{m.group(2)} "), *_inline(m.group(3), "")]
    if line.lstrip().startswith(">"):
        body = line.lstrip()[1:].removeprefix(" ")
        return [("class:md.quote", "│ "), *_inline(body, "class:md.quote")]
    return _inline(line, "")


def render_markdown(text: str) -> StyleAndTextTuples:
    """``text`` rendered line by line, each line ending in a newline (a final newline of
    ``text`` adds no empty line)."""
    out: StyleAndTextTuples = []
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            marker, language = fence.group(1), fence.group(2)
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(marker)),
                len(lines),
            )
            out.extend(_code_block(lines[i + 1 : end], language))
            i = end + 1
            continue
        out.extend(_line(lines[i]))
        out.append(("", "\n"))
        i += 1
    return out


def split_blocks(text: str) -> tuple[str, str]:
    """Split streamed text into (finished blocks, open rest); the two add up to ``text``.

    A block is finished at a blank line outside a code fence, or at a closing fence, so it
    can be rendered and committed to the scrollback while the model is still writing.
    """
    lines = text.split("\n")
    in_fence = ""
    cut = -1
    for n, line in enumerate(lines[:-1]):  # the last line may still be growing
        fence = _FENCE.match(line)
        if fence and not in_fence:
            in_fence = fence.group(1)
        elif in_fence and line.strip().startswith(in_fence):
            in_fence = ""
            cut = n
        elif not in_fence and not line.strip():
            cut = n
    if cut < 0:
        return "", text
    return "\n".join(lines[: cut + 1]) + "\n", "\n".join(lines[cut + 1 :])
