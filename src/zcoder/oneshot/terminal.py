"""The one-shot mode's terminal side: the answer on stdout, activity on stderr, and
approvals read from ``/dev/tty`` (so they work while stdout and stdin are redirected).

Model and relay text reaches the terminal only through ``text.visible``, so escape sequences or
bidi overrides in it cannot forge a prompt or repaint the screen.
"""

from __future__ import annotations

from typing import TextIO

import trio

from zcoder.agent.printed_calls import may_be_printed_call
from zcoder.approval.questions import Answer, ApprovalRequest, question_head
from zcoder.live import Entry, LiveEvent, TextDelta, ThinkingDelta, ToolUpdate
from zcoder.text.visible import escape_controls

__all__ = ["StreamSink", "TtyApprover", "approval_prompt"]

_DIM, _RESET = "\x1b[2m", "\x1b[0m"
_MARKS = {"completed": "ok", "failed": "failed", "denied": "denied", "interrupted": "interrupted"}


class StreamSink:
    """Streams the answer to ``out`` and everything else, one line each, to ``err``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err
        self._tty_out = out.isatty()
        self._tty_err = err.isatty()
        self._streamed = ""  # answer text streamed since the last assistant entry
        self._held = ""  # the part of it not written yet (see _text)
        self._thinking = False
        self._closed: set[TextIO] = set()

    def emit(self, event: LiveEvent) -> None:
        if isinstance(event, TextDelta):
            self._end_thinking()
            self._text(event.text)
        elif isinstance(event, ThinkingDelta):
            self._thinking = True
            text = escape_controls(event.text, keep="\n\t")
            self._write_err(f"{_DIM}{text}{_RESET}" if self._tty_err else text)
        elif isinstance(event, ToolUpdate):
            self._tool(event)
        elif isinstance(event, Entry):
            self._entry(event)

    def close(self) -> None:
        """End the output cleanly (a final newline after a streamed answer)."""
        self._end_thinking()
        self._end_answer()

    def _text(self, text: str) -> None:
        # A reply that starts like a tool call printed as text ({"name": ...}) is held back:
        # the loop may run it as a call, and then it is no part of the answer on stdout.
        holding = not self._streamed or self._held
        self._streamed += text
        if not holding:
            self._write_out(text)
            return
        self._held += text
        if not may_be_printed_call(self._held):
            self._flush_held()

    def _flush_held(self) -> None:
        held, self._held = self._held, ""
        if held:
            self._write_out(held)

    def _write_out(self, text: str) -> None:
        self._write(self._out, escape_controls(text, keep="\n\t") if self._tty_out else text)

    def _write_err(self, text: str) -> None:
        self._write(self._err, text)

    def _write(self, stream: TextIO, text: str) -> None:
        # A reader that went away (``zcoder -p ... | head``) must not break the turn: it
        # still finishes and is saved.
        if stream in self._closed:
            return
        try:
            stream.write(text)
            stream.flush()
        except (BrokenPipeError, ValueError):
            self._closed.add(stream)

    def _end_thinking(self) -> None:
        if self._thinking:
            self._thinking = False
            self._write_err("\n")

    def _end_answer(self) -> None:
        self._flush_held()
        if self._streamed and not self._streamed.endswith("\n"):
            self._write_out("\n")
        self._streamed = ""

    def _tool(self, update: ToolUpdate) -> None:
        if update.state == "pending":
            if self._held:  # the held text was a call: it ran as one
                self._held = self._streamed = ""
            return
        self._end_thinking()
        self._end_answer()
        name = escape_controls(update.name)  # the model chose it: it may hold escapes too
        if update.state == "running":
            line = f"-> {name} {escape_controls(update.target)}"
        else:
            summary = f": {escape_controls(update.summary)}" if update.summary else ""
            line = f"   {name} {_MARKS[update.state]}{summary}"
        self._write_err(line + "\n")

    def _entry(self, entry: Entry) -> None:
        event = entry.event
        if event.role == "assistant":
            self._end_thinking()
            if self._held and "finish" in event.meta:  # held text was finish, printed
                self._held = self._streamed = ""
            if not self._streamed:  # finish(response) arrives whole, never streamed
                self._write_out(event.text + "\n")
            self._end_answer()
        elif event.role in ("error", "system"):
            self._end_thinking()
            self._end_answer()
            prefix = "zcoder: " if event.role == "error" else "zcoder: note: "
            self._write_err(prefix + escape_controls(event.text) + "\n")


def approval_prompt(request: ApprovalRequest) -> str:
    """The question as shown on the terminal, control characters made visible."""
    head = question_head(request)
    body = "\n".join(f"    {escape_controls(line)}" for line in request.text.split("\n"))
    options = {"y": "y = yes, once", "a": "a = yes to all commands of this conversation"}
    choices = [options[c] for c in request.choices if c in options] + ["n = no"]
    return f"\n{head}\n{body}\n[{', '.join(choices)}] "


class TtyApprover:
    """Asks on the controlling terminal; without one every question is answered ``n``."""

    def __init__(self, err: TextIO, tty_path: str = "/dev/tty") -> None:
        self._err = err
        self._tty_path = tty_path

    async def ask(self, request: ApprovalRequest) -> Answer:
        # A blocked read cannot be interrupted; on cancel the thread is abandoned and the
        # turn goes on to its cleanup at once.
        return await trio.to_thread.run_sync(self._ask, request, abandon_on_cancel=True)

    def _ask(self, request: ApprovalRequest) -> Answer:
        try:
            # Two streams: a terminal is not seekable, so one "r+" text file cannot work.
            reader = open(self._tty_path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:
            what = {"command": "command", "tool": "tool call"}.get(request.kind, "message")
            self._err.write(
                f"zcoder: no terminal to ask on: denied the {what} "
                "(use --yes to allow commands without asking)\n"
            )
            self._err.flush()
            return "n"
        with reader, open(self._tty_path, "w", encoding="utf-8") as writer:
            return self._dialog(request, reader, writer)

    @staticmethod
    def _dialog(request: ApprovalRequest, reader: TextIO, writer: TextIO) -> Answer:
        writer.write(approval_prompt(request))
        writer.flush()
        while True:
            line = reader.readline()
            if not line:
                return "n"
            answer = line.strip().lower()
            for choice in request.choices:
                if answer == choice:
                    return choice
            writer.write(f"Please answer {'/'.join(request.choices)}: ")
            writer.flush()
