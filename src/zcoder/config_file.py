"""The settings file ``$ZCODER_HOME/config.toml``: one more layer, under the environment.

Its keys are the environment variables' names in lower case without ``ZCODER_`` (``model``,
``compact_at``), the relay's in a ``[relay]`` table (``ZCODER_RELAY_MAX_QUEUE`` is
``relay.max_queue``, ``ZCODER_RELAY`` is ``relay.mode``); two flag-only settings have their
flag's name (``context_window``, ``think``). The file is read once and its shape checked
whole (TOML syntax, known keys, types); its values then become the strings the environment
would give, so ``load_config`` checks both with the same code, and ``Layers.blame`` turns an
error about a variable the file supplied into one naming ``config file PATH: key``.

Precedence: flag > environment > file > default. A missing file is no error; any other
problem is a ``ConfigError`` (one line, exit status 2). ``tomllib`` is imported only when
there is a file to read.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from zcoder.config import Config, RawOptions, default_home, load_config, relay_settings_from_env
from zcoder.errors import ConfigError

__all__ = [
    "FILE_KEYS",
    "Layers",
    "config_path",
    "layer_settings",
    "load_layers",
    "load_settings",
    "read_document",
    "read_file",
]

Kind = Literal["string", "integer", "number", "switch"]

# key -> (the variable or flag it stands for, the TOML type it takes)
FILE_KEYS: dict[str, tuple[str, Kind]] = {
    "model": ("ZCODER_MODEL", "string"),
    "host": ("ZCODER_HOST", "string"),
    "api": ("ZCODER_API", "string"),
    "api_key": ("ZCODER_API_KEY", "string"),
    "workspace": ("ZCODER_WORKSPACE", "string"),
    "profile": ("ZCODER_PROFILE", "string"),
    "command_policy": ("ZCODER_COMMAND_POLICY", "string"),
    "warmup": ("ZCODER_WARMUP", "switch"),
    "think": ("--no-think", "switch"),
    "context_window": ("--context-window", "integer"),
    "compact_at": ("ZCODER_COMPACT_AT", "integer"),
    "temperature": ("ZCODER_TEMPERATURE", "number"),
    "max_output_tokens": ("ZCODER_MAX_OUTPUT_TOKENS", "integer"),
    "first_token_timeout": ("ZCODER_FIRST_TOKEN_TIMEOUT", "number"),
    "stall_timeout": ("ZCODER_STALL_TIMEOUT", "number"),
    "text_tool_calls": ("ZCODER_TEXT_TOOL_CALLS", "switch"),
    "approval_guard_ms": ("ZCODER_APPROVAL_GUARD_MS", "integer"),
    "agent_name": ("ZCODER_AGENT_NAME", "string"),
    "relay.mode": ("ZCODER_RELAY", "switch"),
    "relay.dir": ("ZCODER_RELAY_DIR", "string"),
    "relay.max_bytes": ("ZCODER_RELAY_MAX_BYTES", "integer"),
    "relay.max_message_chars": ("ZCODER_RELAY_MAX_MESSAGE_CHARS", "integer"),
    "relay.max_queue": ("ZCODER_RELAY_MAX_QUEUE", "integer"),
    "relay.max_hops": ("ZCODER_RELAY_MAX_HOPS", "integer"),
    "relay.io_timeout": ("ZCODER_RELAY_IO_TIMEOUT", "number"),
    "relay.inbound": ("ZCODER_RELAY_INBOUND", "string"),
    "relay.question_timeout": ("ZCODER_RELAY_QUESTION_TIMEOUT", "number"),
    "checkpoints.mode": ("ZCODER_CHECKPOINTS", "switch"),
    "checkpoints.max_bytes": ("ZCODER_CHECKPOINT_MAX_BYTES", "integer"),
    "checkpoints.keep_turns": ("ZCODER_CHECKPOINT_KEEP_TURNS", "integer"),
    "checkpoints.keep_days": ("ZCODER_CHECKPOINT_KEEP_DAYS", "integer"),
    "relay.commands": ("ZCODER_RELAY_COMMANDS", "string"),
    "sandbox_network": ("ZCODER_SANDBOX_NETWORK", "switch"),
}
# The settings grouped in a table of their own (``[relay]``: ``relay.max_queue``).
_TABLES = ("relay", "checkpoints")
_EXPECTED: dict[Kind, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "switch": 'true, false, or a string ("on", "off")',
}
_MAX_BYTES = 1 << 20
_TOML_WHERE = re.compile(r"^(.*) \(at (line \d+, column \d+|end of document)\)$", re.DOTALL)


def config_path(env: Mapping[str, str]) -> Path:
    return default_home(env) / "config.toml"


def _problem(path: Path, message: str) -> ConfigError:
    return ConfigError(f"config file {path}", message)


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when there is no file. Never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise _problem(path, "is a symbolic link to nothing") from None
        return None
    except OSError as exc:
        raise _problem(path, f"cannot be read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _problem(path, "is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, _MAX_BYTES + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_BYTES:
                break
        data = b"".join(chunks)
    except OSError as exc:
        raise _problem(path, f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:
        raise _problem(path, f"is larger than {_MAX_BYTES} bytes")
    return data


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    import tomllib  # only when there is a file: --help and --version never get here

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _problem(path, f"is not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_WHERE.match(str(exc))
        message, where = (m.group(1), m.group(2)) if m else (str(exc), "")
        message = message[:1].lower() + message[1:]
        raise _problem(path, f"{where}: {message}" if where else message) from None


def _flatten(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    """``{"relay": {"max_queue": 1}}`` -> ``{"relay.max_queue": 1}``; unknown keys refused.
    The ``[mcp]`` table is not a setting: ``zcoder.mcp.config`` checks it (only its shape
    as a table is checked here)."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if key == "mcp":
            if not isinstance(value, dict):
                raise _problem(path, "mcp: expected a table ([mcp.servers.NAME])")
            continue
        if key in _TABLES and isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    for key in flat:
        if key in _TABLES:
            raise _problem(path, f"{key}: expected a table ([{key}])")
        if key == "home":
            raise _problem(path, "home: cannot be set in the file it holds (use ZCODER_HOME)")
        if key not in FILE_KEYS:
            raise _problem(path, f"{key}: unknown setting{_misplaced(key)}")
    return flat


def _misplaced(key: str) -> str:
    """The hint for an unknown key: a setting written in the wrong table (TOML puts every
    key after ``[relay]`` into that table, so a top-level one must come before it), else
    the nearest name."""
    table, _, name = key.rpartition(".")
    if table and name in FILE_KEYS:
        return (
            f"; {name} is a top-level setting: move it above the first [table] line "
            f"(every key after [{table}] belongs to that table)"
        )
    homes = [k for k in FILE_KEYS if k.rpartition(".")[2] == key and "." in k]
    if homes:
        table = homes[0].rpartition(".")[0]
        return f"; did you mean {homes[0]}? (write {key} under a [{table}] line)"
    near = difflib.get_close_matches(key, FILE_KEYS, n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""


def _as_text(path: Path, key: str, value: Any) -> str:
    """The value as the environment would spell it; a wrong type is refused here."""
    kind = FILE_KEYS[key][1]
    if isinstance(value, bool):
        ok = kind == "switch"
        text = "on" if value else "off"
    elif isinstance(value, int):
        ok, text = kind in ("integer", "number"), str(value)
    elif isinstance(value, float):
        ok, text = kind == "number", repr(value)
    elif isinstance(value, str):
        ok, text = kind in ("string", "switch"), value
        if ok and not value:
            raise _problem(path, f"{key}: is empty (leave the key out for the default)")
    else:
        ok, text = False, ""
    if not ok:
        got = type(value).__name__
        raise _problem(path, f"{key}: expected {_EXPECTED[kind]}, not {got} {value!r}")
    return text


def read_document(path: Path) -> dict[str, Any] | None:
    """The whole file as TOML tables, unchecked; None when there is no file."""
    data = _read_bytes(path)
    return None if data is None else _parse(path, data)


def read_file(path: Path) -> dict[str, str] | None:
    """The file's settings as ``{key: text}`` (``relay.max_queue``); None when there is no
    file. ``ConfigError`` for a file that cannot be read, is not TOML, or has an unknown
    key or a value of the wrong type."""
    data = _read_bytes(path)
    if data is None:
        return None
    flat = _flatten(path, _parse(path, data))
    return {key: _as_text(path, key, value) for key, value in flat.items()}


@attrs.frozen
class Layers:
    """Flags, environment and file merged: the flags and environment ``load_config`` sees,
    and which of their names the file supplied (``ZCODER_MODEL`` -> ``model``)."""

    path: Path
    found: bool
    opts: RawOptions
    env: Mapping[str, str]
    from_file: Mapping[str, str]

    def blame(self, exc: ConfigError) -> ConfigError:
        """``exc`` naming ``config file PATH: key`` when the file gave the bad value."""
        name, eq, value = exc.option.partition("=")
        key = self.from_file.get(name)
        if key is None:
            return exc
        message = str(exc).removeprefix(exc.option + ": ")
        where = f"{key} = {value!r}" if eq else key
        return ConfigError(f"config file {self.path}: {where}", message)

    def finish(self, config: Config) -> Config:
        """Say the file, not the variable it stands for, in what ``load_config`` kept."""
        if config.relay_problem:
            try:
                relay_settings_from_env(self.env)
            except ConfigError as exc:
                config = attrs.evolve(config, relay_problem=f"relay disabled: {self.blame(exc)}")
        if "ZCODER_HOST" in self.from_file and config.gguf is None:
            host = self.env["ZCODER_HOST"]
            config = attrs.evolve(config, host_source=f"{host} (host in {self.path})")
        return config


def layer_settings(opts: RawOptions, env: Mapping[str, str]) -> Layers:
    """Read the file (once) and put it under ``opts`` and ``env``. A variable that is set
    but empty counts as unset, as ``load_config`` has it."""
    path = config_path(env)
    values = read_file(path)
    merged = dict(env)
    from_file: dict[str, str] = {}
    for key, text in (values or {}).items():
        name = FILE_KEYS[key][0]
        if name == "--context-window" and opts.context_window is None:
            opts = attrs.evolve(opts, context_window=int(text))
        elif name == "--no-think" and not opts.no_think:
            opts = attrs.evolve(opts, no_think=_switch(path, key, text))
        elif name.startswith("-") or env.get(name):
            continue
        else:
            merged[name] = text
        from_file[name] = key
    return Layers(path, values is not None, opts, merged, from_file)


def _switch(path: Path, key: str, text: str) -> bool:
    """``think`` as ``--no-think``: True when it is off."""
    if text not in ("on", "off"):
        raise ConfigError(f"config file {path}: {key}", f"{text!r} is not one of on, off")
    return text == "off"


def load_layers(opts: RawOptions, env: Mapping[str, str]) -> tuple[Layers, Config]:
    """``load_config`` with the file under the environment, and the layers it merged; an
    error names the flag, the variable or the file's key that gave the bad value."""
    layers = layer_settings(opts, env)
    try:
        config = load_config(layers.opts, layers.env)
    except ConfigError as exc:
        raise layers.blame(exc) from None
    return layers, layers.finish(config)


def load_settings(opts: RawOptions, env: Mapping[str, str]) -> Config:
    """The validated settings of a run: flag > environment > file > default."""
    return load_layers(opts, env)[1]
