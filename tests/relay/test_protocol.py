"""The wire frame: exact header grammar, byte counts, incremental decoding."""

from __future__ import annotations

import pytest

from zcoder.errors import FrameError
from zcoder.relay.protocol import (
    INSTANCE_ID_RE,
    MAGIC,
    MAX_HEADER_BYTES,
    MESSAGE_ID_RE,
    PROTOCOL_VERSION,
    STATUSES,
    FrameDecoder,
    encode_frame,
)

PAYLOAD = '{"body":"é 😀"}'.encode()


def test_constants() -> None:
    assert PROTOCOL_VERSION == 1
    assert MAGIC == b"ZCODER-AGENT/1"
    assert MAX_HEADER_BYTES == 36
    assert STATUSES == (
        "accepted",
        "duplicate",
        "paused",
        "full",
        "invalid",
        "wrong_target",
        "unsupported",
        "pong",
    )


def test_encode_counts_bytes_not_characters() -> None:
    assert len(PAYLOAD) == 18 and len(PAYLOAD.decode()) == 14
    assert encode_frame(PAYLOAD, max_bytes=100) == b"ZCODER-AGENT/1 18\n" + PAYLOAD
    assert encode_frame(b"", max_bytes=0) == b"ZCODER-AGENT/1 0\n"


def test_encode_refuses_oversize() -> None:
    assert encode_frame(b"x" * 10, max_bytes=10).endswith(b"x" * 10)
    with pytest.raises(FrameError, match="11 bytes exceeds the limit of 10"):
        encode_frame(b"x" * 11, max_bytes=10)


def test_whole_frame_at_once() -> None:
    dec = FrameDecoder(max_bytes=100)
    assert dec.feed(encode_frame(PAYLOAD, max_bytes=100)) == PAYLOAD
    assert dec.done and dec.header_recognized


@pytest.mark.parametrize("split", range(1, len(b"ZCODER-AGENT/1 18\n") + len(PAYLOAD)))
def test_split_at_every_byte(split: int) -> None:
    frame = encode_frame(PAYLOAD, max_bytes=100)
    dec = FrameDecoder(max_bytes=100)
    assert dec.feed(frame[:split]) is None
    assert not dec.done
    assert dec.feed(frame[split:]) == PAYLOAD


def test_one_byte_at_a_time() -> None:
    frame = encode_frame(PAYLOAD, max_bytes=100)
    dec = FrameDecoder(max_bytes=100)
    results = [dec.feed(frame[i : i + 1]) for i in range(len(frame))]
    assert results[:-1] == [None] * (len(frame) - 1)
    assert results[-1] == PAYLOAD


def test_empty_payload_is_a_complete_frame() -> None:
    assert FrameDecoder(max_bytes=10).feed(b"ZCODER-AGENT/1 0\n") == b""


def test_wanted_never_asks_past_the_largest_frame_plus_one() -> None:
    dec = FrameDecoder(max_bytes=100)
    assert dec.wanted() == MAX_HEADER_BYTES + 101
    dec.feed(b"ZCODER-AGENT/1 5")
    assert dec.wanted() == MAX_HEADER_BYTES - 16 + 101
    dec.feed(b"\nab")
    assert dec.wanted() == 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GET / HTTP/1.1\r\n", "does not start with"),
        (b"zcoder-agent/1 5\n", "does not start with"),
        (b"ZCODER-AGENT/2 5\n", "does not start with"),
        (b"ZCODER-AGENT/1  5\n", "non-decimal"),
        (b"ZCODER-AGENT/1 +5\n", "non-decimal"),
        (b"ZCODER-AGENT/1 -5\n", "non-decimal"),
        (b"ZCODER-AGENT/1 5 \n", "non-decimal"),
        (b"ZCODER-AGENT/1 5\r\n", "non-decimal"),
        (b"ZCODER-AGENT/1 0x10\n", "non-decimal"),
        (b"ZCODER-AGENT/1 \n", "non-decimal"),
        (b"ZCODER-AGENT/1 \xd9\xa5\n", "non-decimal"),  # ARABIC-INDIC DIGIT FIVE in UTF-8
        (b"ZCODER-AGENT/1 05\n", "leading zero"),
        (b"ZCODER-AGENT/1 00\n", "leading zero"),
        (b"ZCODER-AGENT/1 101\n", "declared length 101 exceeds the limit of 100"),
        (b"ZCODER-AGENT/1 1000", "exceeds the limit of 100"),
        (b"ZCODER-AGENT/1 " + b"9" * 30, "exceeds the limit of 100"),
    ],
)
def test_bad_headers(data: bytes, message: str) -> None:
    dec = FrameDecoder(max_bytes=100)
    with pytest.raises(FrameError, match=message):
        dec.feed(data)


def test_header_recognized_only_after_magic_and_space() -> None:
    dec = FrameDecoder(max_bytes=100)
    dec.feed(b"ZCODER-AGENT/1")
    assert not dec.header_recognized
    dec.feed(b" ")
    assert dec.header_recognized
    with pytest.raises(FrameError):
        dec.feed(b"x")
    assert dec.header_recognized


def test_garbage_is_refused_at_its_first_byte() -> None:
    dec = FrameDecoder(max_bytes=100)
    assert dec.feed(b"ZCO") is None
    with pytest.raises(FrameError):
        dec.feed(b"X")


def test_oversize_refused_before_any_payload() -> None:
    dec = FrameDecoder(max_bytes=65536)
    with pytest.raises(FrameError, match="65537"):
        dec.feed(b"ZCODER-AGENT/1 65537\n")


def test_trailing_bytes_in_the_same_feed() -> None:
    dec = FrameDecoder(max_bytes=100)
    with pytest.raises(FrameError, match="after the end"):
        dec.feed(b"ZCODER-AGENT/1 2\nabc")


def test_trailing_bytes_in_a_later_feed() -> None:
    dec = FrameDecoder(max_bytes=100)
    assert dec.feed(b"ZCODER-AGENT/1 2\nab") == b"ab"
    assert dec.feed(b"") is None
    with pytest.raises(FrameError, match="after the end"):
        dec.feed(b"c")


def test_failed_decoder_stays_failed() -> None:
    dec = FrameDecoder(max_bytes=100)
    with pytest.raises(FrameError):
        dec.feed(b"X")
    with pytest.raises(FrameError):
        dec.feed(b"ZCODER-AGENT/1 1\na")


def test_limit_boundary() -> None:
    assert FrameDecoder(max_bytes=5).feed(b"ZCODER-AGENT/1 5\n12345") == b"12345"
    with pytest.raises(FrameError):
        FrameDecoder(max_bytes=5).feed(b"ZCODER-AGENT/1 6\n")
    with pytest.raises(ValueError):
        FrameDecoder(max_bytes=-1)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("42302-18473291", True),
        ("1-abcd", True),
        ("4294967295-" + "a" * 32, True),
        ("0-abcd", False),
        ("042-abcd", False),
        ("42-abc", False),
        ("42-" + "a" * 33, False),
        ("12345678901-abcd", False),
        ("42_abcd", False),
        ("42-ab-cd", False),
        ("42-abcd\n", False),
        ("٤٢-abcd", False),
        ("42-abçd", False),
    ],
)
def test_instance_id_grammar(value: str, ok: bool) -> None:
    assert bool(INSTANCE_ID_RE.fullmatch(value)) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("42110-18471001-3", True),
        ("a", True),
        ("A.b_c-9", True),
        ("x" * 100, True),
        ("x" * 101, False),
        ("", False),
        ("a b", False),
        ("a/b", False),
        ("é", False),
        ("a\n", False),
    ],
)
def test_message_id_grammar(value: str, ok: bool) -> None:
    assert bool(MESSAGE_ID_RE.fullmatch(value)) is ok
