"""The context window of each model, with one owner, and how full a request makes it.

``Windows`` decides the window a model's requests are built for, and nothing else does: the
configured (or default) window, bounded by what the server reports for the model (asked once
per model) or by a smaller one a context error named later. The turns, the warm-up,
``/context`` and the status bar's ``ctx`` all take it from here (``agent.Agent``).
``measure_fill`` is the one formula of ``ctx``, during a turn and between turns.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from zcoder.agent.context import Calibration, Window, decide_window, estimate_tokens
from zcoder.agent.model import ModelClient
from zcoder.agent.stop_note import sent_history
from zcoder.conversation import Message
from zcoder.errors import ModelError
from zcoder.live import ContextFill

__all__ = ["Windows", "measure_fill"]

_log = logging.getLogger(__name__)
# Asking the server for a model's context window is an extra; it must not hold a turn up.
_ASK_SECONDS = 5.0


class Windows:
    """The window of each model, for ``configured`` (``--context-window``; None: default)."""

    def __init__(self, configured: int | None) -> None:
        self._configured = configured
        self._reported: dict[str, int | None] = {}  # what the server said, per model

    def of(self, model: str) -> Window:
        """The window ``model``'s requests are built for now."""
        return decide_window(self._configured, self._reported.get(model))

    async def ask(self, client: ModelClient, model: str, *, served: bool) -> Window:
        """``of(model)``, once the server was asked what it runs ``model`` with: once per
        model (a failure to ask is not an error; it is asked again next time). A server
        that reports nothing before the model ``served`` a request is asked again after:
        Ollama's ``/api/ps`` lists only a loaded model's window."""
        if model not in self._reported:
            with trio.move_on_after(_ASK_SECONDS):
                try:
                    reported = await client.context_length(model)
                except ModelError as exc:
                    _log.debug("context window of %s not known: %r", model, exc)
                else:
                    if reported is not None or served:
                        self._reported[model] = reported
        return self.of(model)

    def learn(self, model: str, tokens: int) -> None:
        """A context error named a window of ``tokens`` (told at once, mid-turn): one
        smaller than ``of(model)`` holds for ``model`` from now on, this turn's next step
        included; a larger one changes nothing."""
        if 0 < tokens < self.of(model).tokens:
            self._reported[model] = tokens


def measure_fill(
    fixed: int, history: Sequence[Message], calibration: Calibration, window: Window
) -> ContextFill:
    """How full a request of ``history`` (as a request sends it) after a system prompt and
    tool schemas estimated at ``fixed`` makes ``window``: the status bar's ``ctx``, during
    a turn (``Steps.fill``) and between turns (``Agent.context_fill``)."""
    estimate = fixed + estimate_tokens(sent_history(history), [])
    return ContextFill(calibration.tokens(estimate), window.tokens)
