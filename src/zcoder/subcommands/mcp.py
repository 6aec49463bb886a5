"""``zcoder mcp list|get|add|remove|enable|disable|test|trust|untrust``: the MCP servers of the
config file, and the trust that lets a workspace's ``.mcp.json`` start its servers.

``add NAME -- COMMAND [ARGS...]`` (as Claude Code spells it) or ``add NAME --url URL``
(``--header "NAME: VALUE"``, repeatable, sent on every request);
``--env KEY=VALUE`` (repeatable), ``--allow`` (its tools run unasked in local turns),
``--startup-timeout SECONDS``, ``--timeout SECONDS`` (per call). ``test NAME`` starts the
server, lists its tools and stops it (the SDK is imported only there). Every change
rewrites ``$ZCODER_HOME/config.toml`` atomically, its other lines kept
(``zcoder.mcp.config.save_servers``). Exit status: 0, 1 (``test`` failed, no such server),
2 (bad usage or config). ``trust [DIR]`` (default: the current directory) records DIR's
``.mcp.json`` as it is now (``zcoder.mcp.project.trust_workspace``) and shows the commands it
trusted; exit status 1 without a ``.mcp.json``. ``untrust [DIR]`` removes that record; exit
status 1 when there was none. ``list`` also shows the servers of the workspace's
``.mcp.json`` (``-w DIR``; by default the app's workspace) and whether they may start. Header
values (tokens) are never printed, only their names.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from zcoder.config import default_home
from zcoder.config_file import config_path, read_file
from zcoder.errors import ConfigError
from zcoder.mcp.config import NAME, ServerConfig, load_servers, save_servers, servers_path
from zcoder.mcp.project import PROJECT_FILE, read_project, trust_workspace, untrust_workspace
from zcoder.text.visible import escape_controls

__all__ = ["run_mcp"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="zcoder mcp", description="Manage the MCP servers of the config file.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = sub.add_parser("list", help="list the servers, with those of the workspace's .mcp.json")
    ls.add_argument("-w", "--workspace", metavar="DIR", help="default: the app's workspace")
    for action, about in (
        ("get", "show one server"),
        ("remove", "remove a server"),
        ("enable", "start the server in later runs"),
        ("disable", "keep the server configured but do not start it"),
        ("test", "start the server, list its tools, stop it"),
    ):
        sub.add_parser(action, help=about).add_argument("name")
    trust = sub.add_parser("trust", help="let DIR's .mcp.json start its servers")
    trust.add_argument("dir", nargs="?", default=".", metavar="DIR")
    untrust = sub.add_parser("untrust", help="stop DIR's .mcp.json from starting its servers")
    untrust.add_argument("dir", nargs="?", default=".", metavar="DIR")
    add = sub.add_parser("add", help="add a server: add NAME -- COMMAND [ARGS...]")
    add.add_argument("name")
    add.add_argument("--url", help="a Streamable HTTP server (http://HOST:PORT/mcp)")
    add.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument(
        "--header", action="append", default=[], metavar="NAME: VALUE", help="with --url"
    )
    add.add_argument("--allow", action="store_true", help="run its tools without asking")
    add.add_argument("--startup-timeout", type=float, metavar="SECONDS")
    add.add_argument("--timeout", type=float, metavar="SECONDS", help="bound on each call")
    return p


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")


def _line(s: ServerConfig, *marks: str) -> str:
    flags = [w for w, on in (("disabled", not s.enabled), ("allowed", s.allow)) if on]
    if s.headers:  # names only: the values are often tokens
        flags.append(f"headers: {', '.join(s.headers)}")
    flags.extend(marks)
    note = f"  [{', '.join(flags)}]" if flags else ""
    return escape_controls(f"{s.name}: {s.describe()}{note}")


def _find(servers: Sequence[ServerConfig], name: str) -> ServerConfig | None:
    return next((s for s in servers if s.name == name), None)


def _add(ns: argparse.Namespace, command: list[str], home: Path) -> int:
    if not NAME.match(ns.name):
        sys.stderr.write("zcoder mcp add: a server name is letters, digits, - and single _\n")
        return 2
    if bool(command) == bool(ns.url):
        sys.stderr.write("zcoder mcp add: give either -- COMMAND [ARGS...] or --url URL\n")
        return 2
    env: dict[str, str] = {}
    for pair in ns.env:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            sys.stderr.write(f"zcoder mcp add: --env {pair!r}: expected KEY=VALUE\n")
            return 2
        env[key] = value
    headers: dict[str, str] = {}
    for pair in ns.header:
        key, colon, value = pair.partition(":")
        if not colon or not key.strip():
            sys.stderr.write("zcoder mcp add: --header: expected NAME: VALUE\n")
            return 2
        headers[key.strip()] = value.strip()
    if headers and not ns.url:
        sys.stderr.write("zcoder mcp add: --header needs --url\n")
        return 2
    servers = load_servers(home)
    if _find(servers, ns.name) is not None:
        sys.stderr.write(f"zcoder mcp add: {ns.name} exists (remove it first)\n")
        return 1
    server = ServerConfig(
        name=ns.name,
        command=command[0] if command else "",
        args=tuple(command[1:]),
        env=env,
        url=ns.url or "",
        headers=headers,
        allow=ns.allow,
    )
    if ns.startup_timeout is not None:
        if not ns.startup_timeout > 0:
            sys.stderr.write("zcoder mcp add: --startup-timeout must be more than 0\n")
            return 2
        server = attrs.evolve(server, startup_timeout=ns.startup_timeout)
    if ns.timeout is not None:
        if not 0 < ns.timeout < math.inf:
            sys.stderr.write("zcoder mcp add: --timeout must be more than 0\n")
            return 2
        server = attrs.evolve(server, timeout=ns.timeout)
    path = save_servers(home, (*servers, server))
    _say(f"Added MCP server {ns.name} to {path}.")
    return 0


def _test(server: ServerConfig) -> int:
    import trio

    from zcoder.mcp.client import list_server_tools

    found, problem = trio.run(list_server_tools, server, Path.cwd())
    if problem:
        sys.stderr.write(escape_controls(f"zcoder mcp test: {server.name}: {problem}") + "\n")
        return 1
    _say(f"{server.name}: {len(found)} tool{'s' if len(found) != 1 else ''}")
    for name, about in found:
        _say(escape_controls(f"  {name}  {about.splitlines()[0] if about else ''}"))
    return 0


def _trust(home: Path, where: str) -> int:
    workspace = Path(where).expanduser()
    if not (workspace / PROJECT_FILE).is_file():
        sys.stderr.write(escape_controls(f"zcoder mcp trust: no {PROJECT_FILE} in {where}") + "\n")
        return 1
    project = trust_workspace(home, workspace)
    n = len(project.servers)
    _say(
        escape_controls(
            f"Trusted {PROJECT_FILE} in {project.workspace}: its {n} MCP server"
            f"{'s start' if n != 1 else ' starts'} in later runs there, until the file changes."
        )
    )
    for s in project.servers:
        _say(escape_controls(f"  {s.name}: {s.describe()}"))
    return 0


def _untrust(home: Path, where: str) -> int:
    workspace = Path(where).expanduser()
    if not untrust_workspace(home, workspace):
        line = f"zcoder mcp untrust: {PROJECT_FILE} in {workspace.resolve()} was not trusted"
        sys.stderr.write(escape_controls(line) + "\n")
        return 1
    _say(
        escape_controls(
            f"Untrusted {PROJECT_FILE} in {workspace.resolve()}: its MCP servers no longer"
            " start there."
        )
    )
    return 0


def _workspace(flag: str | None, env: Mapping[str, str] | None) -> Path:
    """The app's workspace: ``-w``, else ``ZCODER_WORKSPACE``, else the config file's
    ``workspace``, else the current directory."""
    env = os.environ if env is None else env
    where = flag or env.get("ZCODER_WORKSPACE")
    if not where:
        where = (read_file(config_path(env)) or {}).get("workspace") or "."
    return Path(where).expanduser()


def _list(home: Path, servers: Sequence[ServerConfig], where: Path) -> int:
    """The config file's servers, then those of the workspace's ``.mcp.json`` marked with
    whether they may start; 2 when that file is malformed (the rest still listed)."""
    for s in servers:
        _say(_line(s))
    try:
        project = read_project(home, where)
    except ConfigError as exc:
        sys.stderr.write(escape_controls(f"zcoder mcp: {exc}") + "\n")
        return 2
    if not servers and not (project and project.servers):
        _say("No MCP servers (zcoder mcp add NAME -- COMMAND [ARGS...]).")
        return 0
    if project is None:
        return 0
    if project.trusted:
        trust = "trusted"
    elif project.changed:
        trust = f"changed since trusted: zcoder mcp trust {shlex.quote(str(project.workspace))}"
    else:
        trust = f"not trusted: zcoder mcp trust {shlex.quote(str(project.workspace))}"
    taken = {s.name for s in servers}
    source = str(project.workspace / PROJECT_FILE)
    for s in project.servers:
        clash = [f"not started: {servers_path(home).name} has {s.name}"] if s.name in taken else []
        _say(_line(s, source, trust, *clash))
    return 0


def run_mcp(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    args = list(argv)
    command: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, command = args[:at], args[at + 1 :]
    ns = _parser().parse_args(args)
    if command and ns.action != "add":
        sys.stderr.write("zcoder mcp: only add takes -- COMMAND\n")
        return 2
    home = default_home(os.environ if env is None else env)
    try:
        if ns.action == "add":
            return _add(ns, command, home)
        if ns.action == "trust":
            return _trust(home, ns.dir)
        if ns.action == "untrust":
            return _untrust(home, ns.dir)
        servers = load_servers(home)
        if ns.action == "list":
            return _list(home, servers, _workspace(ns.workspace, env))
        server = _find(servers, ns.name)
        if server is None:
            sys.stderr.write(escape_controls(f"zcoder mcp {ns.action}: no server {ns.name}") + "\n")
            return 1
        if ns.action == "get":
            _say(_line(server))
            # Values are often tokens: only the names are printed.
            for key in server.env:
                _say(escape_controls(f"  env {key}=(not shown)"))
            for key in server.headers:
                _say(escape_controls(f"  header {key}: (not shown)"))
            return 0
        if ns.action == "test":
            return _test(server)
        if ns.action == "remove":
            kept = tuple(s for s in servers if s.name != ns.name)
        else:
            on = ns.action == "enable"
            kept = tuple(attrs.evolve(s, enabled=on) if s is server else s for s in servers)
        path = save_servers(home, kept)
        done = {"remove": "Removed", "enable": "Enabled", "disable": "Disabled"}[ns.action]
        _say(f"{done} MCP server {ns.name} in {path}.")
        return 0
    except ConfigError as exc:
        sys.stderr.write(escape_controls(f"zcoder mcp: {exc}") + "\n")
        return 2
    except OSError as exc:
        what = "the trust file" if ns.action in ("trust", "untrust") else "the config file"
        sys.stderr.write(f"zcoder mcp: cannot write {what}: {exc.strerror}\n")
        return 2
