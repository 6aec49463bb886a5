"""The relay wire format, sans I/O: one length-prefixed frame per direction.

A frame is the ASCII header ``ZCODER-AGENT/1 <decimal-byte-count>\\n`` followed by exactly
that many payload bytes (a UTF-8 JSON object, see ``envelope.py``). A connection carries one
request frame and one answer frame, then closes.

The header is strict, so that one byte sequence means one thing:

* the magic ``ZCODER-AGENT/1`` and a single space (``MAGIC_PREFIX``), byte for byte;
* the length as 1-20 ASCII digits, without sign, spaces or leading zeros ("0" itself is a
  valid length; the empty payload is then rejected as unparseable JSON, not here);
* a single ``\\n`` (no ``\\r``);
* the length is at most ``max_bytes`` (``ZCODER_RELAY_MAX_BYTES``, default 65536) and is a
  count of bytes, whatever the locale or the characters the payload encodes;
* nothing after the payload: extra bytes are an error.

``FrameDecoder`` checks every byte as it arrives, so garbage is refused after its first
wrong byte and an oversized length before any payload is read. This module imports no trio
and does no I/O; the listener and the client drive it.
"""

from __future__ import annotations

import re

from zcoder.errors import FrameError
from zcoder.relay.limits import PROTOCOL_VERSION

__all__ = [
    "INSTANCE_ID_PATTERN",
    "INSTANCE_ID_RE",
    "MAGIC",
    "MAGIC_PREFIX",
    "MAX_HEADER_BYTES",
    "MAX_LENGTH_DIGITS",
    "MESSAGE_ID_PATTERN",
    "MESSAGE_ID_RE",
    "PROTOCOL_VERSION",
    "STATUSES",
    "FrameDecoder",
    "encode_frame",
]

MAGIC = b"ZCODER-AGENT/1"
MAGIC_PREFIX = MAGIC + b" "
MAX_LENGTH_DIGITS = 20
MAX_HEADER_BYTES = len(MAGIC_PREFIX) + MAX_LENGTH_DIGITS + 1

#: Every ack status: the spec's table, then ``pong`` (the answer to a ``ping``).
STATUSES: tuple[str, ...] = (
    "accepted",
    "duplicate",
    "paused",
    "full",
    "invalid",
    "wrong_target",
    "unsupported",
    "pong",
)

#: ``<pid>-<nonce>``: a decimal pid without leading zero (at most 10 digits), a dash and
#: 4-32 ASCII letters or digits. Match with ``fullmatch``.
INSTANCE_ID_PATTERN = r"[1-9][0-9]{0,9}-[A-Za-z0-9]{4,32}"
INSTANCE_ID_RE = re.compile(INSTANCE_ID_PATTERN, re.ASCII)
#: 1-100 ASCII letters, digits, ``_``, ``.`` or ``-``. Match with ``fullmatch``.
MESSAGE_ID_PATTERN = r"[A-Za-z0-9_.-]{1,100}"
MESSAGE_ID_RE = re.compile(MESSAGE_ID_PATTERN, re.ASCII)

_DIGITS = frozenset(b"0123456789")
# A complete, valid header in one piece (the common case); anything else goes byte by byte,
# which also finds the exact error.
_HEADER_RE = re.compile(rb"ZCODER-AGENT/1 (0|[1-9][0-9]{0,19})\n")


def encode_frame(payload: bytes, *, max_bytes: int) -> bytes:
    """Return header + payload; ``FrameError`` if the payload exceeds ``max_bytes``."""
    if len(payload) > max_bytes:
        raise FrameError(f"payload of {len(payload)} bytes exceeds the limit of {max_bytes}")
    return b"%s%d\n%s" % (MAGIC_PREFIX, len(payload), payload)


class FrameDecoder:
    """Incremental decoder of one frame.

    ``feed`` the bytes as they arrive; it returns ``None`` until the payload is complete,
    then the payload (once). It raises ``FrameError`` on the first byte that breaks the
    format, on a declared length above ``max_bytes``, and on bytes after the payload (in the
    same or a later ``feed``). After an error the decoder stays failed.
    ``header_recognized`` tells whether the peer sent our full magic and space, i.e. speaks
    this protocol (the listener answers such peers with an ``invalid`` ack).
    """

    def __init__(self, *, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self._max_bytes = max_bytes
        self._max_digits = min(MAX_LENGTH_DIGITS, len(str(max_bytes)))
        self._header = bytearray()
        self._length = -1  # declared payload length, once the header is complete
        self._payload = bytearray()
        self._done = False
        self._failed: FrameError | None = None

    @property
    def header_recognized(self) -> bool:
        return self._header[: len(MAGIC_PREFIX)] == MAGIC_PREFIX

    @property
    def done(self) -> bool:
        return self._done

    def wanted(self) -> int:
        """How many bytes to ask the transport for next: at most the rest of the largest
        frame allowed, plus one, so that a whole frame usually takes one read and bytes sent
        after the payload in the same burst are seen."""
        if self._length < 0:
            return MAX_HEADER_BYTES - len(self._header) + self._max_bytes + 1
        return self._length - len(self._payload) + 1

    def feed(self, data: bytes | bytearray) -> bytes | None:
        if self._failed is not None:
            raise self._failed
        try:
            return self._feed(data)
        except FrameError as exc:
            self._failed = exc
            raise

    def _feed(self, data: bytes | bytearray) -> bytes | None:
        if self._done:
            if data:
                raise FrameError("bytes after the end of the frame")
            return None
        pos = 0
        if self._length < 0:
            pos = self._feed_header(data)
            if self._length < 0:
                return None
        rest = memoryview(data)[pos:]
        needed = self._length - len(self._payload)
        if len(rest) > needed:
            raise FrameError("bytes after the end of the frame")
        self._payload += rest
        if len(self._payload) < self._length:
            return None
        self._done = True
        return bytes(self._payload)

    def _feed_header(self, data: bytes | bytearray) -> int:
        """Consume header bytes from ``data``; return how many were consumed."""
        if not self._header:
            whole = _HEADER_RE.match(data)
            if whole is not None and int(whole.group(1)) <= self._max_bytes:
                self._header += whole.group()
                self._length = int(whole.group(1))
                return whole.end()
        for pos, byte in enumerate(data):
            self._header_byte(byte)
            if self._length >= 0:
                return pos + 1
        return len(data)

    def _header_byte(self, byte: int) -> None:
        n = len(self._header)
        if n < len(MAGIC_PREFIX):
            if byte != MAGIC_PREFIX[n]:
                raise FrameError("the frame does not start with 'ZCODER-AGENT/1 '")
            self._header.append(byte)
            return
        digits = self._header[len(MAGIC_PREFIX) :]
        if byte == 0x0A and digits:
            self._set_length(int(digits))
        elif byte not in _DIGITS:
            raise FrameError(f"the length holds a non-decimal byte {bytes([byte])!r}")
        elif digits[:1] == b"0":
            raise FrameError("the length has a leading zero")
        elif len(digits) >= self._max_digits:
            raise FrameError(f"the declared length exceeds the limit of {self._max_bytes}")
        else:
            self._header.append(byte)

    def _set_length(self, length: int) -> None:
        if length > self._max_bytes:
            raise FrameError(f"declared length {length} exceeds the limit of {self._max_bytes}")
        self._length = length
        self._header.append(0x0A)
