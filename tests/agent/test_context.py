"""The context window, the server-won calibration, the budget and the servers' overflow
errors (``agent/context.py``): pure, no Trio."""

from __future__ import annotations

import pytest

from zcoder.agent.context import (
    DEFAULT_NUM_CTX,
    UNCALIBRATED,
    Budget,
    Calibration,
    Overflow,
    Window,
    decide_window,
    fixed_too_large,
    overflow_of,
)


@pytest.mark.parametrize(
    ("configured", "reported", "window"),
    [
        (None, None, Window(DEFAULT_NUM_CTX)),
        (None, 8192, Window(8192, by_server=True)),  # the SmolLM2 case: the server's is smaller
        (None, 262144, Window(DEFAULT_NUM_CTX)),
        (65536, 262144, Window(65536, configured=True)),
        (65536, 32768, Window(32768, by_server=True)),
        (4096, 4096, Window(4096, configured=True)),
        (4096, 0, Window(4096, configured=True)),  # a nonsense report is ignored
    ],
)
def test_the_smaller_of_configured_and_reported(
    configured: int | None, reported: int | None, window: Window
) -> None:
    assert decide_window(configured, reported) == window


def test_who_set_the_window_is_said() -> None:
    assert Window(2048, by_server=True).source == "reported by the server"
    assert Window(4096, configured=True).source == "--context-window"
    assert Window(DEFAULT_NUM_CTX).source == "zcoder's default"


def test_before_any_count_the_estimate_is_scaled_up() -> None:
    calibration = Calibration()
    assert not calibration.calibrated
    assert calibration.ratio == UNCALIBRATED and calibration.tokens(1000) == 1150


def test_the_servers_count_wins_even_far_from_the_estimate() -> None:
    # SmolLM2's own template drops the tool schemas: llama.cpp counted ~300 tokens of a
    # prompt estimated at 3,023. The next request is judged from that count, not the
    # estimate: the fixed part does not overflow a 2,048 window.
    calibration = Calibration()
    calibration.observe(3023, 300)
    assert calibration.calibrated
    assert calibration.tokens(3023) == 300
    assert calibration.tokens(3123) == 300 + round(100 * UNCALIBRATED)  # the change, scaled
    assert calibration.tokens(100) == 1  # never below one token


def test_the_ratio_is_learnt_from_changes_between_counted_requests() -> None:
    calibration = Calibration()
    calibration.observe(3000, 300)
    calibration.observe(4000, 1500)  # 1,000 estimated tokens more cost 1,200 real ones
    assert calibration.ratio == pytest.approx(1.2)
    assert calibration.tokens(5000) == 2700
    calibration.observe(3500, 900)  # a shrink teaches too (after a compaction)
    assert calibration.ratio == pytest.approx(1800 / 1500)


def test_implausible_changes_teach_nothing_but_the_anchor_moves() -> None:
    calibration = Calibration()
    calibration.observe(1000, 1100)
    calibration.observe(1010, 2000)  # too small a change to judge a tokenizer by
    calibration.observe(2010, 9000)  # 7x: not a tokenizer difference
    calibration.observe(3010, 8000)  # more estimated, fewer counted: truncated or cached
    calibration.observe(0, 100)
    calibration.observe(100, 0)
    assert calibration.ratio == UNCALIBRATED
    assert calibration.anchor == (3010, 8000)


def test_the_budget_compacts_past_the_threshold_and_keeps_reply_room() -> None:
    budget = Budget(Window(2048), compact_at=80, output_cap=4096)
    assert budget.threshold == 1638
    assert not budget.needs_compaction(1638) and budget.needs_compaction(1639)
    assert budget.min_reply == 256
    assert budget.fits(1792) and not budget.fits(1793)
    # vLLM refuses prompt + max_tokens over its length: the cap shrinks to the room left
    assert budget.reply_room(1500) == 548 - 32  # less a margin for the estimate
    assert Budget(Window(32768), output_cap=4096).reply_room(1500) == 4096
    assert budget.percent(1270) == 62


# Each server's exact error text (bodies in tests/fakes/context_errors.py).
LLAMA_CPP = (
    "request (2420 tokens) exceeds the available context size (2048 tokens), try increasing it"
)
VLLM_OLD = (
    "This model's maximum context length is 2048 tokens. However, you requested 2420 tokens "
    "(2000 in the messages, 420 in the completion). Please reduce the length of the messages "
    "or completion."
)
VLLM_NEW = (
    "This model's maximum context length is 2048 tokens. However, your request has 2420 input "
    "tokens. Please reduce the length of the input messages. (parameter=input_tokens, "
    "value=2420)"
)
LM_STUDIO = (
    "Trying to keep the first 2420 tokens when context the overflows. However, the model is "
    "loaded with context length of only 2048 tokens, which is not enough. Try to load the "
    "model with a larger context length, or provide a shorter input"
)
LM_STUDIO_MID = (
    "Reached context length of 2048 tokens with model (arch: qwen3) that does not currently "
    "support mid-generation context overflow. Try reloading with a larger context length or "
    "shortening the prompt/chat."
)
OLLAMA = "the input length exceeds the context length"


@pytest.mark.parametrize(
    ("message", "overflow"),
    [
        (LLAMA_CPP, Overflow(2420, 2048)),
        (VLLM_OLD, Overflow(2000, 2048)),
        (VLLM_NEW, Overflow(2420, 2048)),
        (LM_STUDIO, Overflow(2420, 2048)),
        (LM_STUDIO_MID, Overflow(None, None)),
        (OLLAMA, Overflow(None, None)),
    ],
)
def test_each_servers_context_error_is_recognised_with_its_sizes(
    message: str, overflow: Overflow
) -> None:
    assert overflow_of(message) == overflow


@pytest.mark.parametrize(
    "message",
    [
        "model 'x' not found",
        "registry.ollama.ai/library/qwen3 does not support thinking",
        "Internal Server Error",
        "",
    ],
)
def test_other_errors_are_not_overflows(message: str) -> None:
    assert overflow_of(message) is None


def test_a_fixed_prompt_filling_the_window_needs_a_larger_one() -> None:
    text = fixed_too_large(2100, Window(2048), "Ollama")
    assert "alone take about 2,100 of the 2,048-token context window" in text
    assert "raise --context-window" in text
    by_server = fixed_too_large(2100, Window(2048, by_server=True), "llama.cpp")
    assert "llama.cpp runs this model with a 2048-token window" in by_server
