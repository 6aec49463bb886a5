"""One spool entry on disk: its name, its bytes, and writing it so no reader sees half.

An entry is named ``<sequence:012d>-<message-id>.json`` and holds one line of JSON metadata
(``{"spool":1,"verified":true}``) followed by the enqueue envelope's wire JSON, byte for
byte. ``read_entry`` trusts nothing: it opens without following a symlink, requires a
regular file no larger than any message the listener accepts, and checks the metadata, the
envelope (every wire rule but the target's identity) and that the id matches the name.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from zcoder import strict_json
from zcoder.atomic_write import write_file
from zcoder.errors import InvalidEntry, Rejected
from zcoder.relay.envelope import Enqueue, Limits, enqueue_from_json, enqueue_to_json
from zcoder.relay.protocol import MESSAGE_ID_RE

__all__ = ["ENTRY_NAME_RE", "InvalidEntry", "encode_entry", "entry_name", "read_entry", "write_new"]

#: ``<sequence>-<message-id>.json``; group 1 is the sequence, group 2 the message id.
ENTRY_NAME_RE = re.compile(r"([0-9]{12})-(" + MESSAGE_ID_RE.pattern + r")\.json", re.ASCII)
_META = {True: b'{"spool":1,"verified":true}\n', False: b'{"spool":1,"verified":false}\n'}
_META_LIMIT = 64
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def entry_name(sequence: int, message_id: str) -> str:
    return f"{sequence:012d}-{message_id}.json"


def encode_entry(envelope: Enqueue, *, verified: bool) -> bytes:
    return _META[verified] + enqueue_to_json(envelope)


def write_new(temp_dir: Path, path: Path, data: bytes) -> None:
    """Write ``data`` to a fresh 0600 file ``.tmp-<random>`` in ``temp_dir``, then rename it
    to ``path`` (same file system), so that ``path`` appears complete or not at all. No
    fsync: the spool lives in the runtime directory, which a reboot empties. ``OSError``."""
    write_file(path, data, sync=False, temp_dir=temp_dir, prefix=".tmp-", suffix="")


def read_entry(path: Path, message_id: str, limits: Limits) -> tuple[Enqueue, bool]:
    """The envelope and verified flag stored at ``path``; ``InvalidEntry`` saying why not."""
    limit = _META_LIMIT + limits.max_bytes + 1
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise InvalidEntry(f"cannot open it: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidEntry("it is not a regular file")
        data = _read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InvalidEntry("it is larger than any message the listener accepts")
    head, sep, payload = data.partition(b"\n")
    try:
        meta = strict_json.loads(head) if sep else None
    except ValueError:
        meta = None
    if type(meta) is not dict or meta.keys() != {"spool", "verified"} or meta["spool"] != 1:
        raise InvalidEntry("its metadata line is missing or malformed")
    if type(meta["verified"]) is not bool:
        raise InvalidEntry("its verified flag is not a boolean")
    try:
        envelope = enqueue_from_json(payload, limits=limits)
    except Rejected as exc:
        raise InvalidEntry(f"its envelope is invalid: {exc.reason}") from None
    if envelope.message_id != message_id:
        raise InvalidEntry("its message id differs from its file name")
    return envelope, meta["verified"]


def _read_up_to(fd: int, size: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.read(fd, size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
