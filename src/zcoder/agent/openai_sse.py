"""Server-sent events, with no I/O: the ``data`` of each event from the lines of a body.

Part of the OpenAI client's pure half (``agent/openai_wire.py`` makes chunks of the data).
"""

from __future__ import annotations

from zcoder.agent.json_fields import error_text
from zcoder.errors import MalformedStream, StreamErrorLine

__all__ = ["SSEEvents"]

# An event is one chunk; 16 MiB of data lines without a blank line is not an event.
_MAX_EVENT_CHARS = 16 * 1024 * 1024


class SSEEvents:
    """Server-sent events from lines: the ``data`` of each event, as text.

    Comments (``:`` lines, keep-alives) and other fields are skipped. llama.cpp reports a
    failure inside a stream as an ``error:`` line, which is not an SSE field: it is raised
    as ``StreamErrorLine`` here, like a ``data`` object holding ``error``.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._size = 0

    def line(self, raw: bytes) -> list[str]:
        """Feed one line (without its newline); the events it completed."""
        try:
            text = raw.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError:
            raise MalformedStream("the model server sent an event that is not UTF-8") from None
        if not text:
            return self.end()
        field, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
            self._size += len(value)
            if self._size > _MAX_EVENT_CHARS:
                raise MalformedStream(
                    f"the model server sent an event over {_MAX_EVENT_CHARS} characters"
                )
        elif field == "error":
            raise StreamErrorLine(
                f"the model server failed mid-reply: {error_text(value.encode())}"
            )
        return []

    def end(self) -> list[str]:
        """At a blank line or the end of the body: the pending event, if any."""
        if not self._data:
            return []
        data, self._data, self._size = "\n".join(self._data), [], 0
        return [data]


def _error_of(text: str) -> str:
    return error_text(text.encode())
