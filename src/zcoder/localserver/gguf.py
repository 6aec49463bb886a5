"""What zcoder reads of a ``.gguf`` file before starting a server for it: the model's
architecture and trained context length, from the file's metadata (key-value) section.

Pure reading of a binary stream, no llama.cpp: the GGUF layout (versions 2 and 3) is a
header (``GGUF``, version, tensor count, key-value count) and then the key-value pairs, each
a length-prefixed key, a type tag and a value; arrays (the tokenizer's vocabulary) are
skipped without being kept. Reading stops as soon as both facts are known.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import attrs

from zcoder.errors import NotGguf

__all__ = ["GgufFacts", "NotGguf", "read_facts"]

_MAGIC = b"GGUF"
# type tag -> struct format of a scalar (8: string, 9: array are read apart)
_SCALARS = dict(enumerate("BbHhIif?", 0)) | {10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_KEY = 1 << 16
_MAX_STRING = 1 << 28  # a chat template is kilobytes; anything this large is not metadata


@attrs.frozen
class GgufFacts:
    architecture: str
    # The context length the model was trained with; None when the file does not say.
    context_length: int | None


def read_facts(path: Path) -> GgufFacts:
    """The architecture and trained context of the GGUF file at ``path``.

    Raises ``NotGguf`` when the file is not GGUF (or an unsupported version, or cut
    short) and ``OSError`` when it cannot be read."""
    with path.open("rb") as stream:
        return _read(_Reader(stream))


class _Reader:
    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def take(self, size: int) -> bytes:
        data = self._stream.read(size)
        if len(data) != size:
            raise NotGguf("the file ends inside its metadata")
        return data

    def scalar(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self) -> int:
        return int(self.scalar("Q"))

    def string(self, limit: int = _MAX_STRING) -> str:
        size = self.count()
        if size > limit:
            raise NotGguf("a metadata string is implausibly long")
        return self.take(size).decode("utf-8", errors="replace")

    def skip(self, size: int) -> None:
        self._stream.seek(size, 1)


def _read(reader: _Reader) -> GgufFacts:
    if reader.take(4) != _MAGIC:
        raise NotGguf("not a GGUF file (it does not start with GGUF)")
    version = reader.scalar("I")
    if version not in (2, 3):
        raise NotGguf(f"GGUF version {version} is not supported (2 or 3)")
    reader.count()  # tensors
    pairs = reader.count()
    found: dict[str, int | float | bool | str] = {}
    for _ in range(pairs):
        key = reader.string(_MAX_KEY)
        value = _value(reader, int(reader.scalar("I")))
        if value is not None:
            found[key] = value
        arch = found.get("general.architecture")
        if isinstance(arch, str) and f"{arch}.context_length" in found:
            break
    arch = found.get("general.architecture")
    if not isinstance(arch, str):
        raise NotGguf("its metadata names no architecture (general.architecture)")
    length = found.get(f"{arch}.context_length")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        return GgufFacts(arch, length)
    return GgufFacts(arch, None)


def _value(reader: _Reader, tag: int) -> int | float | bool | str | None:
    """A scalar or string value; an array is skipped (None)."""
    if tag == _STRING:
        return reader.string()
    if tag in _SCALARS:
        return reader.scalar(_SCALARS[tag])
    if tag != _ARRAY:
        raise NotGguf(f"unknown metadata type {tag}")
    inner, length = int(reader.scalar("I")), reader.count()
    if inner in _SCALARS:
        reader.skip(struct.calcsize(_SCALARS[inner]) * length)
    else:
        for _ in range(length):
            _value(reader, inner)
    return None
