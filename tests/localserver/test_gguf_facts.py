"""The GGUF metadata reader: trained context and architecture from a file's key-values,
arrays skipped, and a clear reason for a file that is not GGUF or is cut short."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from zcoder.errors import NotGguf
from zcoder.localserver import window_for
from zcoder.localserver.gguf import GgufFacts, read_facts


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _pair(key: str, tag: int, value: bytes) -> bytes:
    return _string(key) + struct.pack("<I", tag) + value


def gguf_bytes(*pairs: bytes, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(pairs)) + b"".join(pairs)


ARCH = _pair("general.architecture", 8, _string("llama"))
TOKENS = _pair("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + b"".join(map(_string, "abc")))
SCORES = _pair("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<ff", 1, 2))
CONTEXT = _pair("llama.context_length", 4, struct.pack("<I", 8192))


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    return path


def test_the_trained_context_past_arrays_of_every_kind(tmp_path: Path) -> None:
    flag = _pair("general.flag", 7, b"\x01")
    path = write(tmp_path, gguf_bytes(ARCH, flag, TOKENS, SCORES, CONTEXT))
    assert read_facts(path) == GgufFacts("llama", 8192)


def test_reading_stops_once_both_facts_are_known(tmp_path: Path) -> None:
    path = write(tmp_path, gguf_bytes(ARCH, CONTEXT, TOKENS)[:-5])  # cut after what counts
    assert read_facts(path) == GgufFacts("llama", 8192)


def test_a_file_without_the_context_says_none(tmp_path: Path) -> None:
    assert read_facts(write(tmp_path, gguf_bytes(ARCH, TOKENS))) == GgufFacts("llama", None)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"PK\x03\x04 not a model", "not a GGUF file"),
        (gguf_bytes(ARCH, version=1), "GGUF version 1 is not supported"),
        (gguf_bytes(ARCH, TOKENS, CONTEXT)[:-3], "the file ends inside its metadata"),
        (gguf_bytes(CONTEXT), "names no architecture"),
        (gguf_bytes(_pair("x", 99, b"")), "unknown metadata type 99"),
    ],
)
def test_what_is_not_a_readable_gguf_says_why(tmp_path: Path, data: bytes, problem: str) -> None:
    with pytest.raises(NotGguf, match=problem):
        read_facts(write(tmp_path, data))


def test_the_window_is_the_trained_context_capped_by_the_setting() -> None:
    assert window_for(8192, None) == 8192
    assert window_for(131072, None) == 16384  # zcoder's default window
    assert window_for(131072, 32768) == 32768
    assert window_for(4096, 32768) == 4096
    assert window_for(None, 8192) == 8192
