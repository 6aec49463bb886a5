"""The runaway detector: one chunk repeated over and over trips it; ordinary text never."""

from __future__ import annotations

import random

import pytest

from zcoder.agent.runaway import RunawayDetector


def feed_all(detector: RunawayDetector, text: str, piece: int = 4) -> int | None:
    """Feed ``text`` in ``piece``-sized deltas; the offset at which it tripped, or None."""
    for i in range(0, len(text), piece):
        if detector.feed(text[i : i + piece]):
            return i + piece
    return None


@pytest.mark.parametrize(
    "chunk",
    [
        "The answer is the same as before. ",
        "a",
        "\n",
        "def f():\n    return f()\n\n",
        "".join(
            f"Paragraph line {i} that a small model repeats, word for word.\n" for i in range(6)
        ),
    ],
)
def test_a_repeated_chunk_trips_it(chunk: str) -> None:
    detector = RunawayDetector()
    tripped_at = feed_all(detector, chunk * max(400, 4000 // len(chunk)))
    assert tripped_at is not None
    assert detector.tripped and detector.period == len(chunk)
    # soon after the repetition is long enough, not at the end of the stream
    assert tripped_at <= max(detector.min_chars, detector.min_repeats * len(chunk)) + 2 * 200
    assert detector.feed("anything")  # stays tripped


def test_text_before_the_repetition_does_not_hide_it() -> None:
    detector = RunawayDetector()
    assert feed_all(detector, "Here is my plan. " * 3 + "x = 1\n" + "I will now do it. " * 200)


@pytest.mark.parametrize(
    "text",
    [
        "".join(f"| {i} | item {i} | {i * i} |\n" for i in range(500)),  # rows that differ
        "-" * 80 + "\n" + "Some text after a rule. " * 3,  # a rule is short
        "\n".join(f"    assert f({i}) == {i + 1}" for i in range(300)),
    ],
)
def test_ordinary_text_does_not_trip_it(text: str) -> None:
    assert feed_all(RunawayDetector(), text) is None


def test_random_text_does_not_trip_it() -> None:
    rng = random.Random(7)
    text = "".join(rng.choice("abcdefgh \n") for _ in range(50_000))
    assert feed_all(RunawayDetector(), text) is None


def test_a_repetition_below_the_bounds_does_not_trip_it() -> None:
    detector = RunawayDetector()
    # seven repeats of a 100-character line: below min_repeats
    assert feed_all(detector, "x" * 50 + "y" * 50 + ("z" * 99 + "\n") * 7) is None


def test_a_period_longer_than_the_maximum_is_not_looked_for() -> None:
    rng = random.Random(3)
    block = "".join(rng.choice("abcdefgh") for _ in range(300))
    assert feed_all(RunawayDetector(max_period=200), block * 12) is None
    assert feed_all(RunawayDetector(max_period=400), block * 12) is not None
