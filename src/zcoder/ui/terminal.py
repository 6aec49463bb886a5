"""The prompt_toolkit application: live area, approval line, input, status bar.

A non-full-screen app on the asyncio host loop, driven from Trio (guest mode, same thread).
Finished transcript lines are printed above it in batches, so they land in the terminal's
own scrollback; only the moving parts are drawn by the app. ``run`` is the Trio task that
owns the app: it returns when the app ends and, when cancelled, makes the app leave raw
mode before returning, so the terminal is restored before Trio finishes.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Iterable

import trio
from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import History
from prompt_toolkit.input import Input
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, VSplit, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.layout.processors import AfterInput, ConditionalProcessor
from prompt_toolkit.output import Output

from zcoder.commands import find
from zcoder.ui.approval import GUARD, ApprovalLine, count_rows
from zcoder.ui.events import CancelTurn, ExitRequest, Submit, UiEvent
from zcoder.ui.input_controls import ShowControls
from zcoder.ui.keys import KEY_TIMEOUT, SEQUENCE_TIMEOUT, build_key_bindings
from zcoder.ui.ptk_compat import install_shift_enter, redraw_now, write_now
from zcoder.ui.status import Status, render_status
from zcoder.ui.style import STYLE, color_depth
from zcoder.ui.transcript import TranscriptView

__all__ = ["SlashCompleter", "Terminal"]

_log = logging.getLogger(__name__)
_TICK = 0.5
_REDRAW_INTERVAL = 0.02  # status bar refresh while busy (elapsed time)
_EXIT_GRACE = 3.0
_INPUT_ROWS = 12  # the input area's most rows; a longer input scrolls to the cursor


def _app_error(task: asyncio.Task[None]) -> BaseException | None:
    """The app's own failure, if any. A closed input or a vanished terminal (EOF, EIO on
    hang-up) just ends the app; anything else is a crash."""
    if not task.done() or task.cancelled():
        return None
    error = task.exception()
    if isinstance(error, EOFError | OSError):
        _log.info("the terminal went away: %r", error)
        return None
    if error is not None:
        _log.error("the app failed", exc_info=error)
    return error


class SlashCompleter(Completer):
    """Completes slash commands and their arguments from a pure ``complete(text)``; beside a
    command its help, beside an argument what ``describe(option)`` says of it (a send
    target's label, pid and workspace, so that peers named alike can be told apart)."""

    def __init__(
        self,
        complete: Callable[[str], list[str]],
        describe: Callable[[str], str] = lambda option: "",
    ) -> None:
        self._complete = complete
        self._describe = describe

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        for option in self._complete(text):
            command = find(option[1:]) if " " not in option else None
            meta = command.help if command is not None else self._describe(option)
            yield Completion(option, start_position=-len(text), display=option, display_meta=meta)


class Terminal:
    """The app and its state; every method runs on the one thread."""

    def __init__(
        self,
        *,
        status: Status,
        post: Callable[[UiEvent], None],
        schedule: Callable[[Callable[[], None]], object],
        complete: Callable[[str], list[str]] = lambda text: [],
        describe: Callable[[str], str] = lambda option: "",
        history: History | None = None,
        input: Input | None = None,
        output: Output | None = None,
        clock: Callable[[], float] = time.monotonic,
        approval_guard: float = GUARD,
    ) -> None:
        self.status = status
        self._post = post
        self.approval = ApprovalLine(
            schedule, self.invalidate, clock, self.print_above, guard=approval_guard
        )
        self.view = TranscriptView(self.print_above, self.width)
        self._pending: list[StyleAndTextTuples] = []
        self._flush_handle: asyncio.Handle | None = None
        self.buffer = Buffer(
            multiline=True,
            history=history,
            completer=SlashCompleter(complete, describe),
            complete_while_typing=False,
            read_only=Condition(lambda: self.approval.is_open),
        )
        approval_open = Condition(lambda: self.approval.is_open)
        install_shift_enter()
        bindings = build_key_bindings(
            self,
            self.buffer,
            turn_running=Condition(lambda: self.turn_running),
            approval_open=approval_open,
        )
        self.app: Application[None] = Application(
            layout=self._layout(approval_open),
            key_bindings=bindings,
            style=STYLE,
            include_default_pygments_style=False,
            color_depth=color_depth(),
            full_screen=False,
            erase_when_done=True,
            # A fast stream invalidates on every token; drawing at most ~50 times a
            # second keeps the loop free for keys.
            min_redraw_interval=_REDRAW_INTERVAL,
            after_render=lambda _: self.approval.mark_rendered(),
            input=input,
            output=output,
        )
        self.app.ttimeoutlen, self.app.timeoutlen = KEY_TIMEOUT, SEQUENCE_TIMEOUT
        self.app.key_processor.before_key_press += lambda _: self.approval.note_key()

    # -- layout ---------------------------------------------------------------------------
    def _layout(self, approval_open: Condition) -> Layout:
        hint = ConditionalProcessor(
            AfterInput(self._hint, style="class:dim"), Condition(lambda: not self.buffer.text)
        )
        input_window = Window(
            # What is typed or pasted is drawn as the scrollback will show it: a raw bidi
            # override would reorder the line the user reads before sending it.
            BufferControl(self.buffer, input_processors=[ShowControls(), hint]),
            height=Dimension(min=1, max=_INPUT_ROWS),
            # All the columns beside the prompt's, said outright: from a preferred width
            # prompt_toolkit grows a window a column at a time, half of a redraw's time,
            # while a turn streams and the relay's pings wait behind the redraws.
            width=lambda: Dimension.exact(max(self.app.output.get_size().columns - 2, 1)),
            wrap_lines=True,
            dont_extend_height=True,
        )
        # The prompt has a column of its own, so it stays in view when a long input
        # (a pasted 5,000-character line) scrolls its first rows out of the input area.
        prompt = Window(
            FormattedTextControl([("class:prompt", "› ")]),
            width=2,
            dont_extend_width=True,
            dont_extend_height=True,
        )
        return Layout(
            HSplit(
                [
                    Window(
                        FormattedTextControl(self._live),
                        wrap_lines=True,
                        dont_extend_height=True,
                    ),
                    ConditionalContainer(
                        Window(
                            FormattedTextControl(self._approval),
                            wrap_lines=True,
                            dont_extend_height=True,
                        ),
                        filter=approval_open,
                    ),
                    VSplit([prompt, input_window]),
                    CompletionsMenu(max_height=8),
                    Window(
                        FormattedTextControl(lambda: render_status(self.status, self.width())),
                        height=1,
                    ),
                ]
            ),
            focused_element=input_window,
        )

    @property
    def turn_running(self) -> bool:
        """A turn runs: the status's copy of the worker's TurnBegan/TurnEnded, the one."""
        return self.status.turn_running

    def _hint(self) -> StyleAndTextTuples:
        if self.approval.is_open:
            return [("class:dim", "answer the question above")]
        if self.turn_running:
            return [("class:dim", "Esc stops the turn · Enter queues a message")]
        return [("class:dim", "Ask anything · /help for commands · Ctrl-D quits")]

    def _approval(self) -> StyleAndTextTuples:
        # The question may use all rows but the input's, the status bar's and three of the
        # live area (the pending card): its choices must never fall off the screen.
        rows = self.app.output.get_size().rows
        return self.approval.render(max(rows - 5, 4), self.width())

    def _live(self) -> StyleAndTextTuples:
        rows = self.app.output.get_size().rows
        used = count_rows(self._approval(), self.width()) if self.approval.is_open else 0
        return self.view.render_live(max(3, rows - 6 - used))

    def width(self) -> int:
        return max(self.app.output.get_size().columns, 20)

    def invalidate(self) -> None:
        self.app.invalidate()

    # -- key actions (called by the bindings on the host loop) ----------------------------
    def post(self, event: UiEvent) -> None:
        """Hand a key event to the controller (safe from either side of the guest run)."""
        self._post(event)

    def submit(self, text: str) -> None:
        self._post(Submit(text))

    def cancel_turn(self) -> None:
        _log.debug("Escape: cancel the turn")
        self._post(CancelTurn())

    def exit(self) -> None:
        _log.debug("exit key")
        self._post(ExitRequest("user"))

    def answer(self, key: str) -> None:
        self.approval.press(key)

    # -- printing above the app -----------------------------------------------------------
    def print_above(self, fragments: StyleAndTextTuples) -> None:
        """Queue finished lines; one batch per loop iteration goes above the app."""
        self._pending.append(fragments)
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._flush_handle = loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_handle = None
        pending, self._pending = self._pending, []
        if not pending:
            return
        fragments: StyleAndTextTuples = [f for batch in pending for f in batch]
        app = self.app
        if not (app.is_running and not app.is_done):
            self._write(fragments)
            return
        # Like run_in_terminal, minus its switch to cooked mode, where keys typed meanwhile
        # would be echoed into the scrollback, and ^D, ^U, ^C taken by the tty driver.
        app.renderer.erase()
        self._write(fragments)
        redraw_now(app)

    def _write(self, fragments: StyleAndTextTuples) -> None:
        output = self.app.output
        write_now(output, fragments, STYLE, self.app.color_depth)
        output.flush()

    # -- the Trio task --------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the app until it ends; on cancel, end it and wait until raw mode is left."""
        loop = asyncio.get_running_loop()
        token = trio.lowlevel.current_trio_token()
        ended = trio.Event()
        coro = self.app.run_async(set_exception_handler=False, handle_sigint=True)
        task = loop.create_task(coro, context=contextvars.Context())
        task.add_done_callback(lambda _: token.run_sync_soon(ended.set))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._tick)
                task_status.started()
                await ended.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(_EXIT_GRACE):
                _log.debug("ending the app")
                self._stop(task)
                await ended.wait()
            _log.debug("the app has ended")
            error = _app_error(task)
            try:
                self.flush()
            except OSError as exc:  # the terminal is gone (hang-up): nothing to show on
                _log.info("could not print the last lines: %s", exc)
        if error is not None:
            raise error

    def _stop(self, task: asyncio.Task[None]) -> None:
        if task.done():
            return
        future = self.app.future
        if self.app.is_running and future is not None and not future.done():
            self.app.exit()
        else:
            task.cancel()

    async def _tick(self) -> None:
        while True:
            await trio.sleep(_TICK)
            if self.status.turn_running or self.status.warmup == "warming up":
                self.invalidate()
