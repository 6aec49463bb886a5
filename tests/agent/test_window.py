"""The context window decision, the calibrated prompt estimate and the overflow notice."""

from __future__ import annotations

import pytest

from zcoder.agent.window import (
    DEFAULT_NUM_CTX,
    UNCALIBRATED,
    Calibration,
    Window,
    context_notice,
    decide_window,
)


@pytest.mark.parametrize(
    ("configured", "reported", "window"),
    [
        (None, None, Window(DEFAULT_NUM_CTX)),
        (None, 8192, Window(8192, by_server=True)),  # the SmolLM2 case: the server's is smaller
        (None, 262144, Window(DEFAULT_NUM_CTX)),
        (65536, 262144, Window(65536)),
        (65536, 32768, Window(32768, by_server=True)),
        (4096, 4096, Window(4096)),
        (4096, 0, Window(4096)),  # a nonsense report is ignored
    ],
)
def test_the_smaller_of_configured_and_reported(
    configured: int | None, reported: int | None, window: Window
) -> None:
    assert decide_window(configured, reported) == window


def test_calibration_learns_the_tokenizer_ratio() -> None:
    calibration = Calibration()
    assert calibration.ratio == UNCALIBRATED and calibration.tokens(1000) == 1150
    calibration.observe(1000, 1150)  # the estimate ran 15 % low
    calibration.observe(2000, 2260)
    assert calibration.ratio == pytest.approx(3410 / 3000)
    assert calibration.tokens(1000) == 1137


def test_calibration_ignores_implausible_counts_and_keeps_recent_ones() -> None:
    calibration = Calibration()
    calibration.observe(1000, 0)  # not reported
    calibration.observe(1000, 40)  # only the uncached tail was counted
    calibration.observe(1000, 9000)  # nonsense
    calibration.observe(0, 100)
    assert calibration.ratio == UNCALIBRATED
    for _ in range(20):
        calibration.observe(100, 300)  # the upper bound itself is plausible
    calibration.observe(100, 150)
    assert 1.5 < calibration.ratio < 3.0  # old samples age out, one new one counts


def test_no_notice_while_the_prompt_fits() -> None:
    assert context_notice(900, 500, Window(1024), "Ollama") is None


def test_a_nearly_full_conversation_suggests_a_new_session_or_a_larger_window() -> None:
    text = context_notice(950, 300, Window(1024), "Ollama")
    assert text is not None
    assert "nearly fills the context window (1024 tokens)" in text
    assert "Start a new session, or raise --context-window." in text
    over = context_notice(1100, 300, Window(1024, by_server=True), "Ollama")
    assert over is not None and "exceeds" in over and "--context-window" not in over


def test_a_fixed_prompt_filling_the_window_needs_a_larger_one_not_a_new_session() -> None:
    text = context_notice(2300, 2100, Window(2048), "Ollama")
    assert text is not None
    assert "new session" not in text
    assert "alone take about 2100 of the 2048-token context window" in text
    assert "a larger window is needed: raise --context-window" in text
    by_server = context_notice(2300, 2100, Window(2048, by_server=True), "llama.cpp")
    assert by_server is not None and "new session" not in by_server
    assert "llama.cpp runs this model with a 2048-token window" in by_server
