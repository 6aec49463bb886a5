"""The ``[mcp.servers.NAME]`` tables of the config file: read, checked, written back.

A server is ``command`` with ``args`` and ``env`` (stdio), or ``url`` (Streamable HTTP) with
``headers`` sent on every request (they often hold tokens: ``zcoder mcp`` shows their names,
never their values).
``allow = true`` lets its tools run unasked in local turns; ``enabled = false`` keeps it
configured but not started; ``startup_timeout``
(seconds, default 10) bounds start-up, ``initialize`` and the tool list; ``timeout``
(seconds, default 120) bounds each tool call.

Writing (``zcoder mcp add|remove|enable|disable``) keeps every line outside the ``[mcp...]``
tables as it was and writes the servers after them in one canonical form (``[mcp.servers.NAME]``
then ``[mcp.servers.NAME.env]`` and ``[mcp.servers.NAME.headers]``), atomically; it refuses a
file whose ``mcp`` settings are written another way (inline tables, dotted keys), which it
could not rewrite faithfully.
Pure but for the file's reading and writing; floor 2 (``config_file`` is its reader).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from zcoder.atomic_write import write_file
from zcoder.config_file import read_document
from zcoder.errors import ConfigError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "Reach",
    "ServerConfig",
    "load_servers",
    "parse_reach",
    "parse_servers",
    "render_servers",
    "save_servers",
    "servers_path",
]

DEFAULT_STARTUP_TIMEOUT = 10.0
DEFAULT_CALL_TIMEOUT = 120.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")  # no "__": it separates
_KEYS = (
    "command",
    "args",
    "env",
    "url",
    "headers",
    "allow",
    "enabled",
    "startup_timeout",
    "timeout",
)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110)
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]*?)\s*\]\]?\s*(?:#.*)?$")


@attrs.frozen
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    url: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    allow: bool = False
    enabled: bool = True
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    timeout: float = DEFAULT_CALL_TIMEOUT

    def describe(self) -> str:
        """The command line (or URL) as one line."""
        if self.url:
            return self.url
        return " ".join(
            json.dumps(a) if not a or re.search(r"\s|\"", a) else a
            for a in (self.command, *self.args)
        )


def servers_path(home: Path) -> Path:
    return home / "config.toml"


def _bad(path: Path, where: str, message: str) -> ConfigError:
    return ConfigError(f"config file {path}: {where}", message)


@attrs.frozen
class Reach:
    """How one server is started (``command``, ``args``, ``env``) or reached (``url``,
    ``headers``), checked."""

    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    url: str
    headers: dict[str, str]


def parse_reach(source: str, where: str, table: Mapping[str, Any], noun: str) -> Reach:
    """The keys of a server that say how to start or reach it, as the config file's table
    and a ``.mcp.json`` entry both give them (``noun``: what the file calls a mapping,
    ``table`` or ``object``); ``ConfigError`` naming ``source`` (the file) and the key."""

    def bad(at: str, message: str) -> ConfigError:
        return ConfigError(f"{source}: {at}", message)

    command, url = table.get("command", ""), table.get("url", "")
    for key, value in (("command", command), ("url", url)):
        if not isinstance(value, str):
            raise bad(f"{where}.{key}", "expected a string")
    if bool(command) == bool(url):
        raise bad(where, "needs exactly one of command (stdio) or url (Streamable HTTP)")
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(v, str) for v in args):
        raise bad(f"{where}.args", "expected a list of strings")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise bad(f"{where}.env", f"expected {'an' if noun == 'object' else 'a'} {noun} of strings")
    headers = table.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise bad(f"{where}.headers", "expected a table of strings")
    for key, value in headers.items():
        if not _TOKEN.match(key):
            raise bad(f"{where}.headers.{key}", "not an HTTP header name")
        if "\r" in value or "\n" in value:
            raise bad(f"{where}.headers.{key}", "a header value is one line")
    if headers and not url:
        raise bad(f"{where}.headers", "only a url server sends headers")
    return Reach(command, tuple(args), dict(env), url, dict(headers))


def _one(path: Path, name: str, table: Any) -> ServerConfig:
    where = f"mcp.servers.{name}"
    if not NAME.match(name):
        raise _bad(path, where, "a server name is letters, digits, - and single _")
    if not isinstance(table, dict):
        raise _bad(path, where, "expected a table")
    for key in table:
        if key not in _KEYS:
            raise _bad(path, f"{where}.{key}", f"unknown key (known: {', '.join(_KEYS)})")
    reach = parse_reach(f"config file {path}", where, table, "table")
    flags = {}
    for key, default in (("allow", False), ("enabled", True)):
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise _bad(path, f"{where}.{key}", "expected true or false")
        flags[key] = value
    seconds = {}
    for key, fallback in (
        ("startup_timeout", DEFAULT_STARTUP_TIMEOUT),
        ("timeout", DEFAULT_CALL_TIMEOUT),
    ):
        number = table.get(key, fallback)
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _bad(path, f"{where}.{key}", "expected a number of seconds")
        if not (0 < number < math.inf):
            raise _bad(path, f"{where}.{key}", "must be more than 0")
        seconds[key] = float(number)
    return ServerConfig(
        name=name,
        command=reach.command,
        args=reach.args,
        env=reach.env,
        url=reach.url,
        headers=reach.headers,
        allow=flags["allow"],
        enabled=flags["enabled"],
        startup_timeout=seconds["startup_timeout"],
        timeout=seconds["timeout"],
    )


def parse_servers(path: Path, document: Mapping[str, Any]) -> tuple[ServerConfig, ...]:
    """The servers of a parsed config file, in file order; ``ConfigError`` (one line) for
    a malformed ``[mcp]`` table."""
    mcp = document.get("mcp", {})
    if not isinstance(mcp, dict):
        raise _bad(path, "mcp", "expected a table ([mcp.servers.NAME])")
    for key in mcp:
        if key != "servers":
            raise _bad(path, f"mcp.{key}", "unknown key (known: servers)")
    servers = mcp.get("servers", {})
    if not isinstance(servers, dict):
        raise _bad(path, "mcp.servers", "expected a table ([mcp.servers.NAME])")
    return tuple(_one(path, name, table) for name, table in servers.items())


def load_servers(home: Path) -> tuple[ServerConfig, ...]:
    """The configured servers (none without a file)."""
    path = servers_path(home)
    document = read_document(path)
    return () if document is None else parse_servers(path, document)


def _toml_string(text: str) -> str:
    # JSON's escapes are TOML's; TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def render_servers(servers: tuple[ServerConfig, ...]) -> str:
    """The canonical text of the ``[mcp.servers.NAME]`` tables."""
    out: list[str] = []
    for s in servers:
        out.append(f"[mcp.servers.{s.name}]")
        if s.url:
            out.append(f"url = {_toml_string(s.url)}")
        else:
            out.append(f"command = {_toml_string(s.command)}")
            out.append(f"args = [{', '.join(_toml_string(a) for a in s.args)}]")
        if s.allow:
            out.append("allow = true")
        if not s.enabled:
            out.append("enabled = false")
        if s.startup_timeout != DEFAULT_STARTUP_TIMEOUT:
            out.append(f"startup_timeout = {s.startup_timeout!r}")
        if s.timeout != DEFAULT_CALL_TIMEOUT:
            out.append(f"timeout = {s.timeout!r}")
        for key, table in (("env", s.env), ("headers", s.headers)):
            if table:
                out.append("")
                out.append(f"[mcp.servers.{s.name}.{key}]")
                out.extend(f"{_toml_string(k)} = {_toml_string(v)}" for k, v in table.items())
        out.append("")
    return "\n".join(out)


def _without_mcp_tables(text: str) -> str:
    """``text`` without its ``[mcp]`` / ``[mcp.*]`` tables (headers and bodies)."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            head = m.group(1).replace(" ", "")
            inside = head == "mcp" or head.startswith(("mcp.", '"mcp".'))
        if not inside:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return "".join(kept)


def save_servers(home: Path, servers: tuple[ServerConfig, ...]) -> Path:
    """Write ``servers`` as the file's ``[mcp]`` tables, the rest kept; atomic. Checked by
    reading the result back: ``ConfigError`` and nothing written if it would not be exact."""
    import tomllib

    path = servers_path(home)
    document = read_document(path) or {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    rest = _without_mcp_tables(text)
    tables = render_servers(servers)
    new = "\n\n".join(part for part in (rest, tables) if part)
    new = new if new.endswith("\n") or not new else new + "\n"
    try:
        reread = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        reread = None
    others = {k: v for k, v in document.items() if k != "mcp"}
    if (
        reread is None
        or {k: v for k, v in reread.items() if k != "mcp"} != others
        or parse_servers(path, reread) != servers
    ):
        raise ConfigError(
            f"config file {path}",
            "its mcp settings are not in [mcp.servers.NAME] tables; edit it by hand",
        )
    home.mkdir(parents=True, exist_ok=True)
    # Headers and environments often hold tokens: a file that has them is the user's alone
    # (0600), whatever mode it had; otherwise it keeps its own.
    secret = any(s.headers or s.env for s in servers)
    write_file(path, new.encode(), keep_mode=not secret, sync_dir=True)
    return path
