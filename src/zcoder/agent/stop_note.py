"""The history as a request sends it: a stop is a note on the stopped turn's user side, and
every prompt is a message of its own.

The history records a stopped turn with an assistant message ``STOP_MARKER`` (the session
file, the compaction's record of a relayed task's outcome and the spec read it there). Sent
as the model's own words, that message is an example the model follows: a small model
(SmolLM2) answered later tasks with exactly that text. So a request carries it as a
user-side note, ``STOP_NOTE``, joined to the last user-side message of the stopped turn:
the stopped prompt itself, or the tool result the stop came after (Claude Code sends its
note in the same user message as the interrupted tool result). The stopped prompt stays
where it was; it never rides inside the next prompt's message.

Strict chat templates (llama.cpp's Jinja templates of Mistral or Gemma) raise on two user
messages in a row, and Mistral's skips tool calls and results when it checks. So where a
user message would follow a user-side message (the next prompt after a stopped or failed
turn, the empty-reply nudge), the request puts an empty assistant message between them:
what the model said there, nothing. It holds no words the model could copy into a later
reply (measured with SmolLM2 in tests/realmodel: neither the note nor an empty answer was
repeated). Pure: the history itself is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from zcoder.agent.turns import STOP_MARKER
from zcoder.conversation import Message

__all__ = ["NO_REPLY", "STOP_NOTE", "sent_history"]

# Claude Code's words for the same. Measured with SmolLM2-135M (tests/realmodel): a longer
# sentence addressed to the model ("The user stopped your previous reply ...") was echoed
# as the answer of later tasks after two or three stops; these words were not.
STOP_NOTE = "[Request interrupted by user]"
# The assistant's side of a turn that ended without a reply, between two user-side messages.
NO_REPLY = Message(role="assistant", content="")


def _is_stop(message: Message) -> bool:
    # A model that already parroted the marker (an older session) wrote the same message:
    # it goes too, the model should not see that reply either.
    return message.role == "assistant" and message.content == STOP_MARKER and not message.tool_calls


def _user_side(message: Message) -> bool:
    return message.role in ("user", "tool")


def sent_history(history: Sequence[Message]) -> list[Message]:
    """``history`` as the messages of a request: every stop marker a note at the end of
    the stopped turn's last user-side message, and an empty assistant message wherever a
    user message would follow a user-side one."""
    out: list[Message] = []
    for message in history:
        if _is_stop(message):
            if out and _user_side(out[-1]):
                out[-1] = attrs.evolve(out[-1], content=f"{out[-1].content}\n\n{STOP_NOTE}")
            else:
                out.append(Message(role="user", content=STOP_NOTE))
            continue
        if message.role == "user" and out and _user_side(out[-1]):
            out.append(NO_REPLY)
        out.append(message)
    return out
