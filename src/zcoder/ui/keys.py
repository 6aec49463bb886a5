"""Key bindings: Enter sends, Escape stops the turn, Ctrl-C/Ctrl-D exit, y/a/n answer.

Escape is bound non-eagerly and only while a turn runs or a question is open, so Alt keys
(sent as Escape + key) keep working, yet a lone Escape acts within about 60 ms (see
``KEY_TIMEOUT``). Ctrl-C arrives as the ``c-c`` key in raw mode and as ``<sigint>`` when
sent as a signal; both act the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.key_binding.bindings.completion import generate_completions
from prompt_toolkit.keys import Keys

__all__ = ["KEY_TIMEOUT", "SEQUENCE_TIMEOUT", "KeyActions", "build_key_bindings"]

# How long the input parser waits after a lone Escape byte for the rest of an escape
# sequence (Alt+key, arrows): keys sent together stay together. Once it has decided,
# the key processor need hardly wait again for Escape-prefixed bindings, so its own
# timeout is short: Escape then acts within about 60 ms plus the time to draw.
KEY_TIMEOUT = 0.05
SEQUENCE_TIMEOUT = 0.01
# What a terminal sends for a mouse event: SGR (``ESC[<0;12;5M``), urxvt (``ESC[32;12;5M``)
# or the typical three bytes after ``ESC[M``.
_MOUSE_REPORT = re.compile(r"\x1b\[(<?\d+;\d+;\d+[mM]|M...)\Z", re.DOTALL)


class KeyActions(Protocol):
    """What the keys do; the terminal forwards these to the controller."""

    def submit(self, text: str) -> None: ...

    def cancel_turn(self) -> None: ...

    def exit(self) -> None: ...

    def answer(self, key: str) -> None: ...


def _submit(buffer: Buffer, actions: KeyActions) -> None:
    state = buffer.complete_state
    if state is not None and state.current_completion is not None:
        buffer.apply_completion(state.current_completion)
        return
    text = buffer.text
    if not text.strip():
        return
    buffer.append_to_history()
    buffer.reset()
    actions.submit(text)


def build_key_bindings(
    actions: KeyActions, buffer: Buffer, *, turn_running: Filter, approval_open: Filter
) -> KeyBindings:
    """The app's own bindings (merged over prompt_toolkit's emacs defaults)."""
    kb = KeyBindings()
    typing = ~approval_open
    empty = Condition(lambda: not buffer.text)

    @kb.add("enter", filter=typing)
    def _(event: KeyPressEvent) -> None:
        _submit(event.current_buffer, actions)

    @kb.add("escape", "enter", filter=typing)
    @kb.add("c-j", filter=typing)
    def _(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("tab", filter=typing)
    def _(event: KeyPressEvent) -> None:
        generate_completions(event)

    @kb.add("escape", filter=turn_running & typing, eager=False)
    def _(event: KeyPressEvent) -> None:
        actions.cancel_turn()

    @kb.add("escape", filter=approval_open, eager=False)
    def _(event: KeyPressEvent) -> None:
        actions.answer("escape")

    for key in ("y", "Y", "a", "A", "n", "N"):
        kb.add(key, filter=approval_open)(_answer_with(actions, key))

    @kb.add("enter", filter=approval_open)
    def _(event: KeyPressEvent) -> None:
        pass  # Enter answers nothing: a stray Enter must not approve

    @kb.add("c-c")
    @kb.add(Keys.SIGINT)
    def _(event: KeyPressEvent) -> None:
        if approval_open():
            actions.answer("escape")
        elif event.current_buffer.text:
            event.current_buffer.reset()
        else:
            actions.exit()

    @kb.add(Keys.Vt100MouseEvent)
    def _(event: KeyPressEvent) -> None:
        # The app never turns mouse reporting on: this is a report another program left
        # on (dropped), or typed keys that look like one (``ESC [ 3 1 m`` unbracketed),
        # on which prompt_toolkit's own handler raises. Those are text, kept as typed.
        if typing() and not _MOUSE_REPORT.match(event.data):
            event.current_buffer.insert_text(event.data)

    @kb.add("c-d", filter=empty)
    def _(event: KeyPressEvent) -> None:
        actions.exit()

    @kb.add("c-d", filter=approval_open)  # added last: it wins over the exit while asked
    def _(event: KeyPressEvent) -> None:
        actions.answer("c-d")

    return kb


def _answer_with(actions: KeyActions, key: str) -> Callable[[KeyPressEvent], None]:
    def handler(event: KeyPressEvent) -> None:
        actions.answer(key)

    return handler
