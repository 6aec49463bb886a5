"""Property: whatever bytes arrive, in whatever pieces, the listener answers one valid ack
or closes, never raises, and answers the next valid request correctly."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.relay.wire_fakes import (
    ME,
    SENDER,
    FakeSpool,
    enqueue_obj,
    frame,
    make_listener,
    ping_obj,
)
from zcoder.errors import FrameError, RelayTransportError
from zcoder.relay.envelope import Ack, Limits, Rejected, decode_ack, decode_request
from zcoder.relay.listener import Listener
from zcoder.relay.protocol import STATUSES, FrameDecoder

LIMITS = Limits(max_bytes=4096, max_message_chars=100)
SEEDS = [frame(ping_obj()), frame(enqueue_obj())]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if action == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif action == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[pos : pos + draw(st.integers(1, 8))]
        else:
            del data[pos:]
    return bytes(data)


@st.composite
def mutated_envelopes(draw: st.DrawFn) -> bytes:
    obj: dict[str, Any] = draw(st.sampled_from([enqueue_obj(), ping_obj()]))
    for key in draw(st.lists(st.sampled_from([*obj, "extra"]), max_size=3)):
        if draw(st.booleans()):
            obj[key] = draw(json_values)
        else:
            obj.pop(key, None)
    return frame(obj)


requests = st.one_of(
    st.binary(max_size=120),
    mutated_frames(),
    mutated_envelopes(),
    st.builds(lambda n, tail: b"ZCODER-AGENT/1 %d\n" % n + tail, st.integers(0, 5000), st.binary()),
)


Outcome = tuple[str, str] | None  # (status, message id) of the ack, or None: closed


def answer_to(payload: bytes) -> tuple[str, str]:
    try:
        request = decode_request(payload, my_instance_id=ME, limits=LIMITS)
    except Rejected as exc:
        return exc.status, exc.message_id
    return ("pong" if request.type == "ping" else "accepted"), request.message_id


def expected_replies(data: bytes) -> set[Outcome]:
    """What a correct listener may answer. Bytes after a complete frame are refused when
    they arrive with it, but may arrive after the answer, so both outcomes are correct."""
    decoder = FrameDecoder(max_bytes=LIMITS.max_bytes)
    complete: bytes | None = None
    for i in range(len(data)):
        try:
            payload = decoder.feed(data[i : i + 1])
        except FrameError:
            refused: Outcome = ("invalid", "") if decoder.header_recognized else None
            return {refused} if complete is None else {refused, answer_to(complete)}
        if payload is not None:
            complete = payload
    return {None} if complete is None else {answer_to(complete)}


async def one_connection(listener: Listener, pieces: list[bytes], eof: bool) -> bytes:
    ours, theirs = trio.testing.memory_stream_pair()
    reply = bytearray()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(listener.handle, theirs, None)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            for piece in pieces:
                await ours.send_all(piece)
            if eof:
                await ours.send_eof()
        while chunk := await ours.receive_some():
            reply += chunk
    return bytes(reply)


def parse_reply(reply: bytes) -> Ack:
    decoder = FrameDecoder(max_bytes=LIMITS.max_bytes)
    payload = decoder.feed(reply)
    assert payload is not None, f"incomplete ack frame {reply!r}"
    return decode_ack(payload)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=requests, cuts=st.lists(st.integers(0, 10_000), max_size=6), eof=st.booleans())
def test_any_input_gets_one_valid_ack_or_a_close(data: bytes, cuts: list[int], eof: bool) -> None:
    async def scenario() -> None:
        listener = make_listener(FakeSpool(), io_timeout=2.0, limits=LIMITS)
        reply = await one_connection(listener, split(data, cuts), eof)
        if reply == b"":
            assert None in expected_replies(data)
        else:
            ack = parse_reply(reply)
            assert ack.status in STATUSES
            assert (ack.status, ack.message_id) in expected_replies(data)
        stats = listener.statistics()
        assert (stats.errors, stats.active) == (0, 0)
        # and it keeps serving: a valid request afterwards gets its exact answer
        fresh = frame(enqueue_obj(message_id=f"{SENDER}-after-the-fuzz"))
        ack = parse_reply(await one_connection(listener, [fresh], True))
        assert (ack.status, ack.message_id) == ("accepted", f"{SENDER}-after-the-fuzz")
        ack = parse_reply(await one_connection(listener, [frame(ping_obj())], False))
        assert (ack.status, ack.state) == ("pong", "ready")

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def test_the_oracle() -> None:
    """The checks above must be able to fail."""
    with pytest.raises(RelayTransportError):
        parse_reply(b"ZCODER-AGENT/1 2\n{}")
    assert expected_replies(b"GET /") == {None}
    assert expected_replies(b"ZCODER-AGENT/1 x") == {("invalid", "")}
    assert expected_replies(frame(ping_obj())) == {("pong", "p1")}
    assert expected_replies(frame(ping_obj())[:-1]) == {None}
    assert expected_replies(frame(ping_obj()) + b"x") == {("invalid", ""), ("pong", "p1")}
