"""The relay spec's configuration table as one frozen value (read from the environment by
``config.relay_settings_from_env``, which validates it).

It lives in the relay package, beside the limits it defaults to, so that the relay never
imports the application's settings module: ``config`` imports this, not the other way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import attrs

from zcoder.relay.limits import (
    DEFAULT_IO_TIMEOUT,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_HOPS,
    DEFAULT_MAX_MESSAGE_CHARS,
    DEFAULT_MAX_QUEUE,
    DEFAULT_QUESTION_TIMEOUT,
)

__all__ = [
    "INBOUND_MODES",
    "RELAY_COMMANDS",
    "RELAY_MODES",
    "InboundMode",
    "RelayCommands",
    "RelayMode",
    "RelaySettings",
]

RelayMode = Literal["on", "off", "paused"]
RELAY_MODES: tuple[RelayMode, ...] = ("on", "off", "paused")
InboundMode = Literal["accept", "hold"]
INBOUND_MODES: tuple[InboundMode, ...] = ("accept", "hold")
# How a relayed turn's commands run: as the local policy says, asking (``ask``), in the
# sandbox without a question (``sandbox``), or never (``deny``).
RelayCommands = Literal["ask", "sandbox", "deny"]
RELAY_COMMANDS: tuple[RelayCommands, ...] = ("ask", "sandbox", "deny")


@attrs.frozen
class RelaySettings:
    """The relay spec's configuration table."""

    mode: RelayMode = "on"
    dir: Path | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    max_queue: int = DEFAULT_MAX_QUEUE
    io_timeout: float = DEFAULT_IO_TIMEOUT
    # What becomes of an accepted message: it runs in its turn, or waits for the user.
    inbound: InboundMode = "accept"
    # A message that many relayed turns led to is held for the user (a loop, not work).
    max_hops: int = DEFAULT_MAX_HOPS
    # Seconds a relayed turn's question waits for the user, then counts as no (0: forever).
    question_timeout: float = DEFAULT_QUESTION_TIMEOUT
    commands: RelayCommands = "ask"
