"""The history as a request sends it: a stop the user made is a note on the user's side.

The history records a stopped turn with an assistant message ``STOP_MARKER`` (the session
file, the compaction's record of a relayed task's outcome and the spec read it there). Sent
as the model's own words, that message is an example the model follows: a small model
(SmolLM2) answered later tasks with exactly that text. So a request carries it as a
user-side note instead, the way the user would say it, and never as something the model
said.

Strict chat templates (llama.cpp's Jinja templates of Mistral or Gemma) raise on two user
messages in a row, so a note joins the user message next to it, and so does any other user
message that follows one (the empty-reply nudge after a prompt): a prompt right after a
stop reads ``STOP_NOTE``, a blank line, then the prompt. A stop after tool results with
nothing after it (the warm-up right after Escape) is a user message of its own. Pure: the
history itself is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from zcoder.agent.turns import STOP_MARKER
from zcoder.conversation import Message

__all__ = ["STOP_NOTE", "sent_history"]

# Claude Code's words for the same. Measured with SmolLM2-135M (tests/realmodel): a longer
# sentence addressed to the model ("The user stopped your previous reply ...") was echoed
# as the answer of later tasks after two or three stops; these words were not.
STOP_NOTE = "[Request interrupted by user]"


def _is_stop(message: Message) -> bool:
    # A model that already parroted the marker (an older session) wrote the same message:
    # it goes too, the model should not see that reply either.
    return message.role == "assistant" and message.content == STOP_MARKER and not message.tool_calls


def sent_history(history: Sequence[Message]) -> list[Message]:
    """``history`` as the messages of a request: every stop marker a user-side note, and
    no two user messages in a row (joined with a blank line between)."""
    out: list[Message] = []
    for message in history:
        if _is_stop(message):
            message = Message(role="user", content=STOP_NOTE)
        if message.role == "user" and out and out[-1].role == "user":
            out[-1] = attrs.evolve(out[-1], content=f"{out[-1].content}\n\n{message.content}")
        else:
            out.append(message)
    return out
