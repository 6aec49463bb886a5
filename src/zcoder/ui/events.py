"""What the user did, as the key bindings report it to the controller."""

from __future__ import annotations

import attrs

__all__ = ["CancelTurn", "ExitRequest", "Submit", "UiEvent"]


@attrs.frozen
class Submit:
    """Enter on a non-empty input: a prompt or a slash command."""

    text: str


@attrs.frozen
class CancelTurn:
    """Escape while a turn runs."""


@attrs.frozen
class ExitRequest:
    """Leave the app: ``user`` (Ctrl-D, Ctrl-C, /quit) or a signal name."""

    reason: str = "user"


UiEvent = Submit | CancelTurn | ExitRequest
