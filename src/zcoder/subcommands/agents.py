"""``zcoder agents [--json]``: list the live zcoder instances of this user on this machine.

Read-only: it needs no instance of its own, no model and no runtime directory, and it never
creates the relay directory (a missing default one simply has no peers: no instance has
started yet). It takes the same steps as the discovery of ``/list-agents`` and the
``list_agents`` tool, with the same checks and deadline, and shows the same table, but waits
for the pongs without an event loop (``relay/blocking.py``): it loads no Trio. Exit status
0, also when no instance is live; 1 when the relay directory or a relay setting is unusable,
or when ``ZCODER_RELAY_DIR`` names a directory that does not exist (a typo there would
otherwise read as "no instances"); the reason goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping

from zcoder.config import relay_settings_from_env
from zcoder.errors import ConfigError, RelayError
from zcoder.relay.blocking import discover_blocking
from zcoder.relay.listing import peer_record, peer_table
from zcoder.relay.paths import ensure_relay_dir, select_relay_dir
from zcoder.relay.registry import Peer
from zcoder.text.visible import escape_controls

__all__ = ["run_agents"]


def _find_peers(env: Mapping[str, str]) -> list[Peer]:
    """The live peers; ``ConfigError`` or ``RelayError`` when the relay cannot be read."""
    settings = relay_settings_from_env(env)
    relay_dir = ensure_relay_dir(select_relay_dir(settings, env), create=False)
    if settings.dir is not None and not os.path.lexists(relay_dir):
        raise RelayError(f"relay directory {str(relay_dir)!r} (ZCODER_RELAY_DIR) does not exist")
    return discover_blocking(
        relay_dir,
        exclude_instance_id=None,
        io_timeout=settings.io_timeout,
        max_bytes=settings.max_bytes,
    )


def run_agents(
    as_json: bool,
    env: Mapping[str, str],
    blame: Callable[[ConfigError], ConfigError] = lambda exc: exc,
) -> int:
    """``blame`` names the config file's key for a bad value it gave (``config_file``)."""
    try:
        peers = _find_peers(env)
    except ConfigError as exc:
        sys.stderr.write(f"zcoder agents: {escape_controls(str(blame(exc)))}\n")
        return 1
    except RelayError as exc:
        sys.stderr.write(f"zcoder agents: {escape_controls(str(exc))}\n")
        return 1
    if as_json:
        # ASCII-only JSON: a peer's self-reported strings cannot reach the terminal raw.
        text = json.dumps([peer_record(p) for p in peers], indent=2, ensure_ascii=True)
    else:
        text = peer_table(peers)
    sys.stdout.write(text + "\n")
    return 0
