"""``zcoder config [OPTIONS]``: print the effective settings and where each came from.

The same flags, environment and file as a run, read the same way (``config_file``); each
setting is one line ``key  value  source``, the key as the file spells it and the source one
of ``flag --model``, ``env ZCODER_MODEL``, ``file PATH``, ``default``. The API key is never
shown, only whether one is set. A bad setting is the run's own one line and exit status 2.
The row ``sandbox`` says whether the command sandbox works on this machine (it is
tried: ``zcoder.sandbox.probe``) and if not why and what to install.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from zcoder.config import Config, RawOptions
from zcoder.config_file import Layers, load_layers
from zcoder.defaults import DEFAULT_HOST
from zcoder.errors import ConfigError
from zcoder.sandbox.probe import check_sandbox
from zcoder.sandbox.settle import settle_sandbox
from zcoder.text.visible import escape_controls

__all__ = ["run_config", "settings_table"]

_DEFAULT_NUM_CTX = 16384  # agent/context.py's DEFAULT_NUM_CTX, without importing the agent


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _host(config: Config) -> str:
    if config.gguf is not None:
        return f"llama.cpp started for {config.gguf}"
    return f"look for one, else {DEFAULT_HOST}" if config.autodetect else config.host


def _api(config: Config) -> str:
    """The API when none was given: a host without ``/v1`` is asked at start whether it
    speaks Ollama's API or the OpenAI-compatible one, so only start-up knows."""
    if config.autodetect or config.api == "openai":
        return f"{config.api} (from the host)" if not config.autodetect else "found at start"
    return "ollama, or openai if the host speaks it (checked at start)"


# key, the flag(s) that set it (RawOptions field, spelling), its variables, the value shown
_Row = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], Callable[[Config], str]]
_ROWS: tuple[_Row, ...] = (
    (
        "model",
        (("model", "--model"), ("gguf", "--gguf")),
        ("ZCODER_MODEL",),
        lambda c: c.model,
    ),
    (
        "host",
        (("host", "--host"), ("gguf", "--gguf")),
        ("ZCODER_HOST", "OLLAMA_HOST"),
        lambda c: _host(c),
    ),
    (
        "api",
        (("api", "--api"), ("gguf", "--gguf")),
        ("ZCODER_API",),
        lambda c: c.api if c.api_given else _api(c),
    ),
    ("api_key", (), ("ZCODER_API_KEY",), lambda c: "set" if c.api_key else "not set"),
    (
        "workspace",
        (("workspace", "--workspace"),),
        ("ZCODER_WORKSPACE",),
        lambda c: str(c.workspace),
    ),
    ("profile", (("profile", "--profile"),), ("ZCODER_PROFILE",), lambda c: c.profile),
    (
        "command_policy",
        (("yes", "--yes"), ("deny_commands", "--deny-commands"), ("sandbox", "--sandbox")),
        ("ZCODER_COMMAND_POLICY",),
        lambda c: c.command_policy,
    ),
    (
        "sandbox_network",
        (("sandbox_network", "--sandbox-network"),),
        ("ZCODER_SANDBOX_NETWORK",),
        lambda c: _on(c.sandbox_network),
    ),
    ("home", (), ("ZCODER_HOME",), lambda c: str(c.home)),
    ("warmup", (("no_warmup", "--no-warmup"),), ("ZCODER_WARMUP",), lambda c: _on(c.warmup)),
    ("think", (("no_think", "--no-think"),), (), lambda c: _on(c.think)),
    (
        "context_window",
        (("context_window", "--context-window"),),
        (),
        lambda c: str(c.context_window or _DEFAULT_NUM_CTX),
    ),
    (
        "compact_at",
        (("compact_at", "--compact-at"),),
        ("ZCODER_COMPACT_AT",),
        lambda c: str(c.compact_at),
    ),
    (
        "temperature",
        (("temperature", "--temperature"),),
        ("ZCODER_TEMPERATURE",),
        lambda c: "the server's" if c.temperature is None else f"{c.temperature:g}",
    ),
    (
        "max_output_tokens",
        (("max_output_tokens", "--max-output-tokens"),),
        ("ZCODER_MAX_OUTPUT_TOKENS",),
        lambda c: str(c.max_output_tokens),
    ),
    (
        "first_token_timeout",
        (),
        ("ZCODER_FIRST_TOKEN_TIMEOUT",),
        lambda c: f"{c.first_token_timeout:g}",
    ),
    ("stall_timeout", (), ("ZCODER_STALL_TIMEOUT",), lambda c: f"{c.stall_timeout:g}"),
    (
        "text_tool_calls",
        (("no_text_tool_calls", "--no-text-tool-calls"),),
        ("ZCODER_TEXT_TOOL_CALLS",),
        lambda c: _on(c.text_tool_calls),
    ),
    (
        "approval_guard_ms",
        (),
        ("ZCODER_APPROVAL_GUARD_MS",),
        lambda c: str(round(c.approval_guard * 1000)),
    ),
    (
        "agent_name",
        (("agent_name", "--agent-name"),),
        ("ZCODER_AGENT_NAME",),
        lambda c: c.agent_name or f"{c.workspace.name or c.workspace} (the workspace's name)",
    ),
    ("relay.mode", (), ("ZCODER_RELAY",), lambda c: c.relay.mode),
    ("relay.dir", (), ("ZCODER_RELAY_DIR",), lambda c: str(c.relay.dir or "the shared default")),
    ("relay.max_bytes", (), ("ZCODER_RELAY_MAX_BYTES",), lambda c: str(c.relay.max_bytes)),
    (
        "relay.max_message_chars",
        (),
        ("ZCODER_RELAY_MAX_MESSAGE_CHARS",),
        lambda c: str(c.relay.max_message_chars),
    ),
    ("relay.max_queue", (), ("ZCODER_RELAY_MAX_QUEUE",), lambda c: str(c.relay.max_queue)),
    ("relay.max_hops", (), ("ZCODER_RELAY_MAX_HOPS",), lambda c: str(c.relay.max_hops)),
    ("relay.io_timeout", (), ("ZCODER_RELAY_IO_TIMEOUT",), lambda c: f"{c.relay.io_timeout:g}"),
    ("relay.inbound", (), ("ZCODER_RELAY_INBOUND",), lambda c: c.relay.inbound),
    (
        "relay.question_timeout",
        (),
        ("ZCODER_RELAY_QUESTION_TIMEOUT",),
        lambda c: f"{c.relay.question_timeout:g}",
    ),
    ("checkpoints.mode", (), ("ZCODER_CHECKPOINTS",), lambda c: c.checkpoints.mode),
    (
        "checkpoints.max_bytes",
        (),
        ("ZCODER_CHECKPOINT_MAX_BYTES",),
        lambda c: str(c.checkpoints.max_bytes),
    ),
    (
        "checkpoints.keep_turns",
        (),
        ("ZCODER_CHECKPOINT_KEEP_TURNS",),
        lambda c: str(c.checkpoints.keep_turns),
    ),
    (
        "checkpoints.keep_days",
        (),
        ("ZCODER_CHECKPOINT_KEEP_DAYS",),
        lambda c: str(c.checkpoints.keep_days),
    ),
    ("relay.commands", (), ("ZCODER_RELAY_COMMANDS",), lambda c: c.relay.commands),
)


def _shown_path(path: Path, env: Mapping[str, str]) -> str:
    home = env.get("HOME", "")
    if home and path.is_relative_to(home) and Path(home) != Path("/"):
        return "~/" + str(path.relative_to(home))
    return str(path)


def _source(row: _Row, opts: RawOptions, env: Mapping[str, str], layers: Layers) -> str:
    key, flags, variables, _ = row
    for field, spelling in flags:
        if getattr(opts, field):
            return f"flag {spelling}"
    for var in variables:
        if env.get(var):
            return f"env {var}"
    names = [var for var in variables] + [spelling for _, spelling in flags]
    if any(layers.from_file.get(name) == key for name in names):
        return f"file {_shown_path(layers.path, env)}"
    return "default"


def settings_table(opts: RawOptions, env: Mapping[str, str], layers: Layers, config: Config) -> str:
    """One line per setting: key, effective value, source (aligned columns)."""
    rows = [(row[0], row[3](config), _source(row, opts, env, layers)) for row in _ROWS]
    # Beside the policy: whether the sandbox it may ask for works on this machine.
    at = [r[0] for r in rows].index("sandbox_network") + 1
    rows.insert(at, ("sandbox", _sandbox_here(), "checked now"))
    if config.relay_problem:  # the relay is off: its other values are not in use
        rows = [r for r in rows if not r[0].startswith("relay.")]
        rows.append(("relay.mode", "off", config.relay_problem))
    width = [max(len(r[i]) for r in rows) for i in (0, 1)]
    shown = _shown_path(layers.path, env)
    head = f"config file: {shown}" + ("" if layers.found else " (none)")
    lines = [head] + [f"{k:<{width[0]}}  {v:<{width[1]}}  {s}".rstrip() for k, v, s in rows]
    if config.sandbox_note:  # why command_policy or relay.commands is not what was asked
        lines.append(config.sandbox_note)
    return "\n".join(escape_controls(line) for line in lines)


def _sandbox_here() -> str:
    """Whether the sandbox works on this machine, and if not why and what to do."""
    found = check_sandbox()
    return found.line() if found.works else f"cannot work here: {found.line()}"


def run_config(opts: RawOptions, env: Mapping[str, str]) -> int:
    try:
        layers, config = load_layers(opts, env)
        config = settle_sandbox(layers, config)
    except ConfigError as exc:
        sys.stderr.write(f"zcoder: {escape_controls(str(exc))}\n")
        return 2
    sys.stdout.write(settings_table(opts, env, layers, config) + "\n")
    return 0
