"""Text folded to one line: the one form for a value that must not span lines.

Headers of relay records, status text and error lines put untrusted text between fixed
words; a newline in it would start a line of its own (and could pass for a header or a
prompt). Pure, floor 1; ``ui.text.one_line`` adds the escaping of control characters.
"""

from __future__ import annotations

__all__ = ["model_file_name", "one_line"]


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` with every whitespace run (newlines included) folded to one space and the
    ends stripped; longer than ``limit`` characters, cut to ``limit`` ending in ``...``."""
    flat = " ".join(text.split())
    if limit is None or len(flat) <= limit:
        return flat
    return flat[: max(limit - 3, 0)] + "..."


def model_file_name(name: str) -> str:
    """A model named by its file's path (llama.cpp names the model it serves by the path it
    was started with) as the file's name, without its directories; any other name as it
    is. Only for showing: requests keep the full name."""
    stripped = name.rstrip("/")
    if "/" in stripped and stripped.lower().endswith((".gguf", ".bin", ".safetensors")):
        return stripped.rsplit("/", 1)[-1]
    return name
