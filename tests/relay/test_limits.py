"""The relay's numbers live in relay/limits.py: every default agrees, none is spelled twice."""

from __future__ import annotations

import re
from pathlib import Path

from zcoder.config import RelaySettings, relay_settings_from_env
from zcoder.relay import limits
from zcoder.relay.envelope import Limits

SRC = Path(__file__).resolve().parents[2] / "src" / "zcoder"


def test_settings_and_envelope_limits_take_their_defaults_from_limits() -> None:
    expected = (
        limits.DEFAULT_MAX_BYTES,
        limits.DEFAULT_MAX_MESSAGE_CHARS,
        limits.DEFAULT_MAX_QUEUE,
        limits.DEFAULT_IO_TIMEOUT,
    )
    for settings in (RelaySettings(), relay_settings_from_env({})):
        got = (settings.max_bytes, settings.max_message_chars, settings.max_queue)
        assert (*got, settings.io_timeout) == expected
    assert (Limits().max_bytes, Limits().max_message_chars) == expected[:2]


def test_no_module_spells_a_relay_limit_or_the_protocol_version() -> None:
    # A default in a signature or a field, a default setting's text, a version literal. Zero
    # is no relay limit: it is max()'s answer for nothing and argparse's "any free port".
    spelled = re.compile(
        r"(?:max_bytes|max_message_chars|max_queue|io_timeout|default)(?:: \w+)? ?= ?"
        r"(?!0(?![.\d]))\d"
        r"|\"(?:65536|16000)\"|protocol=1\b"
    )
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "limits.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []
