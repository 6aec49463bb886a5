"""The relay's numbers in one place: the protocol version, the field bounds of envelopes and
manifests, and the defaults and accepted ranges of the ``ZCODER_RELAY_*`` settings.

Everything that spells one of these imports it from here, so that a limit changes once.
Pure constants, no imports.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_IO_TIMEOUT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_HOPS",
    "DEFAULT_MAX_MESSAGE_CHARS",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_QUESTION_TIMEOUT",
    "IO_TIMEOUT_RANGE",
    "MAX_BYTES_RANGE",
    "MAX_HOPS",
    "MAX_HOPS_RANGE",
    "MAX_MESSAGE_CHARS_RANGE",
    "MAX_PEER_ID_CHARS",
    "MAX_PID",
    "MAX_PROJECT_CHARS",
    "MAX_QUEUE_RANGE",
    "MAX_TIME",
    "MAX_WORKSPACE_CHARS",
    "PROTOCOL_VERSION",
    "QUESTION_TIMEOUT_RANGE",
]

#: The ``protocol`` field of every envelope and manifest this implementation writes.
PROTOCOL_VERSION = 1

#: Frame payload limit in bytes (``ZCODER_RELAY_MAX_BYTES``) and its accepted range.
DEFAULT_MAX_BYTES = 65536
MAX_BYTES_RANGE = (1024, 16777216)
#: Relayed task text limit in characters (``ZCODER_RELAY_MAX_MESSAGE_CHARS``).
DEFAULT_MAX_MESSAGE_CHARS = 16000
MAX_MESSAGE_CHARS_RANGE = (1, 1000000)
#: Accepted messages waiting in the spool (``ZCODER_RELAY_MAX_QUEUE``).
DEFAULT_MAX_QUEUE = 16
MAX_QUEUE_RANGE = (1, 1024)
#: The hop count at which a relayed message is held for the user (``ZCODER_RELAY_MAX_HOPS``):
#: a local prompt's send is hop 0, a send made while running a hop-n message is hop n + 1.
DEFAULT_MAX_HOPS = 4
MAX_HOPS_RANGE = (1, 64)
#: The largest ``hops`` an enqueue may carry (zcoder's extension of version 1).
MAX_HOPS = 1000
#: Seconds one socket operation may take (``ZCODER_RELAY_IO_TIMEOUT``).
DEFAULT_IO_TIMEOUT = 2.0
IO_TIMEOUT_RANGE = (0.05, 60.0)

#: Seconds a relayed turn's question waits for the local user before it counts as no
#: (``ZCODER_RELAY_QUESTION_TIMEOUT``; 0: it waits as long as it takes).
DEFAULT_QUESTION_TIMEOUT = 300.0
QUESTION_TIMEOUT_RANGE = (0.0, 86400.0)

#: Field bounds shared by envelopes and manifests.
MAX_PROJECT_CHARS = 256
MAX_WORKSPACE_CHARS = 4096
MAX_PEER_ID_CHARS = 256
MAX_PID = 2**31 - 1
MAX_TIME = 2**53
