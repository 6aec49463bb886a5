"""What a one-shot run prints, per ``--output-format``: ``TextOutput`` (the answer streamed
as text) or ``JsonOutput`` (``json``: one result record at the end; ``stream-json``: one
record per event, the result last). ``open_output`` picks one.

Both put the ``zcoder: ...`` lines on stderr: failures, notes, a denial for want of a
terminal. Text mode adds the tool activity, the thinking and the closing session line;
the JSON modes leave those to the JSON, so stdout holds nothing but JSON lines.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from zcoder import __version__
from zcoder.agent.model import ChatChunk
from zcoder.agent.turns import OutcomeStatus, TurnOutcome
from zcoder.config import Config
from zcoder.live import Entry, LiveEvent, TurnSink
from zcoder.oneshot.records import Report, event_record
from zcoder.oneshot.terminal import StreamSink
from zcoder.session.store import Session
from zcoder.text.visible import escape_controls

__all__ = ["JsonOutput", "Output", "TextOutput", "open_output", "resume_line"]


def resume_line(config: Config, session_id: str) -> str:
    return f"session: {session_id} (resume with: {config.resume_command(session_id)})\n"


class TextOutput:
    """The answer on stdout as it streams; everything else on stderr."""

    def __init__(self, out: TextIO, err: TextIO, config: Config) -> None:
        self.sink: TurnSink = StreamSink(out, err)
        self._err = err
        self._config = config

    def note(self, line: str) -> None:
        self._err.write(f"zcoder: {line}\n")
        self._err.flush()

    def started(self, config: Config, session: Session, *, resumed: bool) -> None:
        pass

    def counted(self, chunk: ChatChunk) -> None:
        pass

    def ended(self, outcome: TurnOutcome | None, exit_code: int, session_id: str | None) -> None:
        """The turn is over (``outcome`` None: it raised); ``session_id`` names the saved
        session, None when none was saved."""
        if outcome is not None:
            assert isinstance(self.sink, StreamSink)
            self.sink.close()
        if session_id is not None:
            self._err.write(resume_line(self._config, session_id))
            self._err.flush()

    def failed(self, message: str, exit_code: int, status: OutcomeStatus = "error") -> int:
        """The run ends before or without a turn; return ``exit_code``."""
        if message:
            self.note(message)
        return exit_code


class JsonOutput:
    """JSON records, one per line, on stdout: every event (``stream``) or only the result.

    It is the turn's sink itself: it follows every event for the result record.
    """

    def __init__(self, out: TextIO, err: TextIO, config: Config, *, stream: bool) -> None:
        self.sink: TurnSink = self
        self._out = out
        self._err = err
        self._stream = stream
        self._report = Report(config.workspace)
        self._began = time.monotonic()
        self._closed = False  # the reader of stdout went away
        self._done = False  # the result record is out

    def emit(self, event: LiveEvent) -> None:
        self._report.take(event)
        if self._stream:
            record = event_record(event)
            if record is not None:
                self._write(record)
        if isinstance(event, Entry) and event.event.role in ("error", "system"):
            prefix = "" if event.event.role == "error" else "note: "
            self.note(prefix + escape_controls(event.event.text))

    def note(self, line: str) -> None:
        self._err.write(f"zcoder: {line}\n")
        self._err.flush()

    def started(self, config: Config, session: Session, *, resumed: bool) -> None:
        if self._stream:
            self._write(
                {
                    "type": "start",
                    "session_id": session.id,
                    "resumed": resumed,
                    "model": session.model,
                    "server": config.host,
                    "api": config.api,
                    "workspace": str(config.workspace),
                    "profile": config.profile,
                    "version": __version__,
                }
            )

    def counted(self, chunk: ChatChunk) -> None:
        self._report.usage.add(chunk)
        if self._stream:
            usage = self._report.usage
            self._write({"type": "usage", **usage.record()})

    def ended(self, outcome: TurnOutcome | None, exit_code: int, session_id: str | None) -> None:
        if outcome is not None:
            self._result(outcome.status, outcome.text, outcome.error, exit_code, session_id)

    def failed(self, message: str, exit_code: int, status: OutcomeStatus = "error") -> int:
        if message:
            self.note(message)
        self._result(status, "", message, exit_code, None)
        return exit_code

    def _result(
        self,
        status: OutcomeStatus,
        answer: str,
        error: str,
        exit_code: int,
        session_id: str | None,
    ) -> None:
        if self._done:
            return
        self._done = True
        self._write(
            self._report.result(
                status=status,
                answer=answer,
                error=error,
                exit_code=exit_code,
                session_id=session_id,
                duration_ms=round(1000 * (time.monotonic() - self._began)),
            )
        )

    def _write(self, record: dict[str, Any]) -> None:
        # ASCII only: no raw control or bidi character from the model reaches a terminal
        # that shows the JSON, and any reader decodes it.
        if self._closed:
            return
        try:
            self._out.write(json.dumps(record) + "\n")
            self._out.flush()
        except (BrokenPipeError, ValueError):  # the reader went away: the run goes on
            self._closed = True


Output = TextOutput | JsonOutput


def open_output(config: Config, out: TextIO, err: TextIO) -> Output:
    if config.output_format == "text":
        return TextOutput(out, err, config)
    return JsonOutput(out, err, config, stream=config.output_format == "stream-json")
