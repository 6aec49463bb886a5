"""Start-up: a run that asks for the sandbox where it cannot work is never unsandboxed by
surprise.

``--sandbox`` or ``ZCODER_COMMAND_POLICY=sandbox`` (and ``ZCODER_RELAY_COMMANDS=sandbox``)
are refused with one line naming the reason and the fix (``ConfigError``: exit status 2,
nothing runs); so is ``--sandbox-network`` where no command is sandboxed (the user
meant the sandbox). The config file is read by every run, also on machines without
bubblewrap: a ``command_policy = "sandbox"`` or ``[relay] commands = "sandbox"`` there makes
commands ask instead, and ``Config.sandbox_note`` says so at start-up.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from zcoder.config import Config
from zcoder.config_file import Layers
from zcoder.errors import ConfigError
from zcoder.sandbox.probe import SandboxCheck, check_sandbox

__all__ = ["settle_sandbox", "status_label", "wants_sandbox"]


def wants_sandbox(config: Config) -> bool:
    """Whether some command of this run is to be sandboxed."""
    relayed = config.relay.commands == "sandbox" and not config.relay_problem
    return config.command_policy == "sandbox" or relayed


def settle_sandbox(
    layers: Layers, config: Config, check: Callable[[], SandboxCheck] | None = None
) -> Config:
    """``config`` as it can run here (see the module's docstring); ``check`` says whether
    the sandbox works (default: ``check_sandbox``, run only when the sandbox is asked for)."""
    if not wants_sandbox(config):
        if layers.opts.sandbox_network:
            # Alone it would confine nothing: the user meant the sandbox, with network.
            raise ConfigError(
                "--sandbox-network",
                'no command runs in the sandbox: add --sandbox (or [relay] commands = "sandbox")',
            )
        return config
    found = (check or check_sandbox)()
    if found.works:
        return config
    why = f"the sandbox cannot work here: {found.line()}"
    notes = []
    unsandboxed: set[str] = set()
    if config.command_policy == "sandbox":
        if layers.opts.sandbox or "ZCODER_COMMAND_POLICY" not in layers.from_file:
            flag = "--sandbox" if layers.opts.sandbox else "ZCODER_COMMAND_POLICY=sandbox"
            raise ConfigError(flag, why)
        config = attrs.evolve(config, command_policy="ask")
        notes.append('command_policy = "sandbox"')
        # A relayed turn's commands follow the policy unless [relay] commands says more.
        unsandboxed.update(("user", "relay") if config.relay.commands == "ask" else ("user",))
    if config.relay.commands == "sandbox" and not config.relay_problem:
        if "ZCODER_RELAY_COMMANDS" not in layers.from_file:
            raise ConfigError("ZCODER_RELAY_COMMANDS=sandbox", why)
        config = attrs.evolve(config, relay=attrs.evolve(config.relay, commands="ask"))
        notes.append('[relay] commands = "sandbox"')
        unsandboxed.add("relay")
    note = f"config file {layers.path}: {' and '.join(notes)}: {why}; commands ask instead"
    return attrs.evolve(config, sandbox_note=note, unsandboxed=frozenset(unsandboxed))


def status_label(config: Config) -> str:
    """What the status bar says of the sandbox: ``commands sandboxed`` (every command),
    ``relayed commands sandboxed`` (``[relay] commands``), with ``+ network`` when
    sandboxed commands may use it; "" when no command is sandboxed."""
    if config.command_policy == "sandbox":
        label = "commands sandboxed"
    elif wants_sandbox(config):
        label = "relayed commands sandboxed"
    else:
        return ""
    return label + (" + network" if config.sandbox_network else "")
