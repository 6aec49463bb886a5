"""A workspace's ``.mcp.json`` and the trust that lets its servers start.

A project may carry ``.mcp.json`` in the format other agents read (``{"mcpServers": {"NAME":
{"command": ..., "args": [...], "env": {...}}}}``; ``url`` for a Streamable HTTP server; other
keys, such as ``type``, are ignored). Opening a repository must not start its programs, so
its servers start only once the user has trusted that workspace: ``zcoder mcp trust [DIR]``
records the workspace's canonical path and the SHA-256 of the file's bytes in
``$ZCODER_HOME/mcp-trust.json`` (atomic write); ``zcoder mcp untrust [DIR]`` removes the
record. A file whose bytes differ from the trusted ones is untrusted again. The bytes are
read once, then hashed and parsed, so the servers started are those of the content that
was checked.

A trusted file's servers never get ``allow``: their calls always ask. Pure but for the
files' reading and writing; floor 2.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import attrs

from zcoder.atomic_write import write_file
from zcoder.errors import ConfigError
from zcoder.mcp.config import NAME, ServerConfig, parse_reach

__all__ = [
    "PROJECT_FILE",
    "Project",
    "read_project",
    "trust_path",
    "trust_workspace",
    "untrust_workspace",
]

PROJECT_FILE = ".mcp.json"
TRUST_FILE = "mcp-trust.json"


@attrs.frozen
class Project:
    """A workspace's ``.mcp.json``: where, its servers, and whether they may start."""

    workspace: Path
    servers: tuple[ServerConfig, ...]
    digest: str
    trusted: bool
    changed: bool = False  # not trusted: other content of it was

    def untrusted_line(self) -> str:
        n = len(self.servers)
        command = f"zcoder mcp trust {shlex.quote(str(self.workspace))}"  # pasted as it is
        return (
            f"{PROJECT_FILE} in {self.workspace} names {n} MCP server{'s' if n != 1 else ''};"
            f" they do not start until you trust it: {command}"
        )


def trust_path(home: Path) -> Path:
    return home / TRUST_FILE


def _bad(path: Path, where: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {where}" if where else str(path), message)


def parse_project(path: Path, data: bytes) -> tuple[ServerConfig, ...]:
    """The servers of a ``.mcp.json``'s bytes; ``ConfigError`` (one line) when malformed."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(path, "", f"not JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise _bad(path, "", 'expected an object ({"mcpServers": {...}})')
    servers = document.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise _bad(path, "mcpServers", "expected an object")
    out: list[ServerConfig] = []
    for name, entry in servers.items():
        where = f"mcpServers.{name}"
        if not NAME.match(name):
            raise _bad(path, where, "a server name is letters, digits, - and single _")
        if not isinstance(entry, dict):
            raise _bad(path, where, "expected an object")
        reach = parse_reach(str(path), where, entry, "object")
        out.append(
            ServerConfig(
                name,
                command=reach.command,
                args=reach.args,
                env=reach.env,
                url=reach.url,
                headers=reach.headers,
            )
        )
    return tuple(out)


def _trusted(home: Path) -> dict[str, str]:
    """The trust file's ``{canonical workspace: sha256}``; empty when absent or unreadable
    (nothing is trusted then)."""
    try:
        document = json.loads(trust_path(home).read_bytes())
    except (OSError, ValueError):
        return {}
    workspaces = document.get("workspaces") if isinstance(document, dict) else None
    if not isinstance(workspaces, dict):
        return {}
    return {k: v for k, v in workspaces.items() if isinstance(k, str) and isinstance(v, str)}


def read_project(home: Path, workspace: Path) -> Project | None:
    """The workspace's ``.mcp.json`` (``None`` without one) and whether its exact content
    is trusted. ``ConfigError`` when it is malformed or unreadable."""
    canonical = workspace.resolve()
    path = canonical / PROJECT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _bad(path, "", f"cannot read it: {exc.strerror}") from None
    digest = hashlib.sha256(data).hexdigest()
    servers = parse_project(path, data)
    recorded = _trusted(home).get(str(canonical))
    trusted = recorded == digest
    return Project(
        canonical, servers, digest, trusted, changed=recorded is not None and not trusted
    )


def trust_workspace(home: Path, workspace: Path) -> Project:
    """Record the workspace's current ``.mcp.json`` as trusted (atomic write) and return
    it. ``ConfigError`` when there is none or it is malformed (nothing recorded)."""
    project = read_project(home, workspace)
    if project is None:
        raise ConfigError(str(workspace.resolve()), f"no {PROJECT_FILE} here")
    workspaces = _trusted(home)
    workspaces[str(project.workspace)] = project.digest
    _write_trusted(home, workspaces)
    return attrs.evolve(project, trusted=True, changed=False)


def untrust_workspace(home: Path, workspace: Path) -> bool:
    """Forget the workspace's trust (atomic write), whether or not it still has a
    ``.mcp.json``; ``False`` when there was none to forget (nothing written)."""
    workspaces = _trusted(home)
    if workspaces.pop(str(workspace.resolve()), None) is None:
        return False
    _write_trusted(home, workspaces)
    return True


def _write_trusted(home: Path, workspaces: dict[str, str]) -> None:
    text = json.dumps({"version": 1, "workspaces": workspaces}, indent=2, sort_keys=True)
    home.mkdir(parents=True, exist_ok=True)
    write_file(trust_path(home), (text + "\n").encode(), sync_dir=True)
