"""The model requests of one turn and their sizes.

``Steps`` builds each request of a turn (one fresh system message, then the session
history), keeps the estimates of the last one built, and measures them against the turn's
window with the model's calibration (``context.py``): the ``Sizes`` a compaction is planned
with, the fill the status bar shows, and the one-token requests that have the server count
a prompt. The turn loop (``loop.py``) decides what to do with the sizes.
"""

from __future__ import annotations

from typing import Any

import attrs

from zcoder.agent.compaction import Sizes
from zcoder.agent.context import Budget, Window, estimate_tokens
from zcoder.agent.model import ChatRequest
from zcoder.agent.parts import TurnParts
from zcoder.agent.prompts import build_system_prompt
from zcoder.agent.rounds import RoundRunner
from zcoder.agent.stop_note import sent_history
from zcoder.agent.turns import TurnRequest
from zcoder.agent.windows import measure_fill
from zcoder.conversation import Message
from zcoder.live import ContextFill

__all__ = ["Steps"]


class Steps:
    """Builds and measures the requests of one turn, for the model's window now."""

    def __init__(
        self, parts: TurnParts, request: TurnRequest, instructions: str, rounds: RoundRunner
    ) -> None:
        self._p = parts
        self._request = request
        self._instructions = instructions
        self._rounds = rounds
        self.estimate = 0  # of the last request built, before calibration
        self._fixed_estimate = 0

    @property
    def window(self) -> Window:
        """The window the requests are built for: ``windows.Windows`` decides it (a
        context error's smaller window holds from the next step on)."""
        return self._p.windows.of(self._p.model())

    def build(self, think: bool, *, num_predict: int | None = None) -> ChatRequest:
        """The next step's request: one fresh system message, then the whole history as
        a request sends it (a stop the user made is a note on the user's side).

        The warm-up sends the very same request with ``num_predict`` 1, so that the
        server's prompt cache then holds the prefix of the first real step.
        """
        specs = self._rounds.tool_specs()
        system = self.system_message(specs)
        messages = [system, *sent_history(self._p.session.history)]
        self.estimate = estimate_tokens(messages, specs)
        self._fixed_estimate = estimate_tokens([system], specs)
        config = self._p.config
        return ChatRequest(
            model=self._p.model(),
            messages=messages,
            tools=specs,
            think=think,
            num_ctx=self.window.tokens,
            num_predict=num_predict or config.max_output_tokens,
            temperature=config.temperature,
        )

    def system_message(self, specs: list[dict[str, Any]]) -> Message:
        sender = self._request.sender
        prompt = build_system_prompt(
            profile=self._p.config.profile,
            workspace=self._p.config.workspace,
            tool_names=[s["function"]["name"] for s in specs],
            instructions=self._instructions,
            relay_sender=sender.instance_id if sender is not None else "",
        )
        return Message(role="system", content=prompt)

    @property
    def fixed_estimate(self) -> int:
        """The estimated size of the system prompt and the tool schemas of this turn."""
        if not self._fixed_estimate:
            self.build(think=False)
        return self._fixed_estimate

    def sizes(self) -> Sizes:
        """How this turn measures its requests."""
        config = self._p.config
        budget = Budget(self.window, config.compact_at, config.max_output_tokens)
        return Sizes(self._p.calibration, budget, self.fixed_estimate)

    def prompt_tokens(self) -> int:
        """The real size of the last request built, as the calibration judges it."""
        return self._p.calibration.tokens(self.estimate)

    def fill(self) -> ContextFill:
        """How full the next request will make the window (the status bar's ``ctx``)."""
        history = self._p.session.history
        return measure_fill(self.fixed_estimate, history, self._p.calibration, self.window)

    async def count_fixed(self, think: bool) -> None:
        """Have the server count a request that fits: the system prompt and the tool
        schemas with a one-word prompt, one output token. The calibration's anchor."""
        specs = self._rounds.tool_specs()
        messages = [self.system_message(specs), Message(role="user", content="Hello")]
        request = attrs.evolve(self.build(think, num_predict=1), messages=messages)
        await self.count(request, estimate_tokens(messages, specs))

    async def count(self, request: ChatRequest, estimate: int) -> None:
        """Send a one-token request and learn from the server's count of its prompt."""
        prompt_tokens = 0
        async with self._p.client.stream_chat(request) as chunks:
            async for chunk in chunks:
                prompt_tokens = chunk.prompt_eval_count or prompt_tokens
        self._p.calibration.observe(estimate, prompt_tokens)
