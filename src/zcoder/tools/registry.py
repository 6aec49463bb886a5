"""The toolbox: which tools the model may call, and the one door every call goes through.

``Toolbox.call`` never raises (``trio.Cancelled`` excepted): an unknown tool, arguments that
do not fit the schema, a refused path or a failing tool all come back as a ``ToolResult``
whose text starts with ``Error: ``. It is ``check`` then ``run``: the agent loop calls the two
apart, so that a call's arguments are checked once, before it is put to the user, and the
checked arguments (defaults filled in) are the ones that run. Tools may raise ``ToolError``
or ``WorkspaceError`` to refuse; the message becomes the result. Every result is capped at
``ctx.output_cap``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from zcoder.errors import ToolError, WorkspaceError
from zcoder.tools.apply_patch import APPLY_PATCH
from zcoder.tools.base import Asks, Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.edit import REPLACE_TEXT, WRITE_FILE
from zcoder.tools.finish import FINISH
from zcoder.tools.fs import LIST_FILES, READ_FILE, READ_FILE_RANGE
from zcoder.tools.output import cap_text
from zcoder.tools.patch import parse_patch
from zcoder.tools.relay_tools import AGENT_MESSAGE_STATUS, LIST_AGENTS, SEND_AGENT_MESSAGE
from zcoder.tools.schema import check_arguments
from zcoder.tools.search import SEARCH
from zcoder.tools.shell import RUN_COMMAND

__all__ = ["CheckedCall", "Toolbox", "core_tools"]

_TARGET_CHARS = 120
_PATCH_TARGET = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(\S+)", re.MULTILINE)
# The tools that never change a file of the workspace: no checkpoint is taken for them. Any
# other tool (the file tools, commands, an MCP server's tools) may change files.
_READ_ONLY = frozenset(
    {
        "list_files",
        "read_file",
        "read_file_range",
        "search",
        "finish",
        LIST_AGENTS,
        SEND_AGENT_MESSAGE,
        AGENT_MESSAGE_STATUS,
    }
)


def core_tools() -> list[Tool]:
    """The tools of every session, in the order the model sees them."""
    return [
        LIST_FILES,
        READ_FILE,
        READ_FILE_RANGE,
        SEARCH,
        WRITE_FILE,
        REPLACE_TEXT,
        APPLY_PATCH,
        RUN_COMMAND,
        FINISH,
    ]


def _error(text: str) -> ToolResult:
    # The summary is what the user sees on the tool card: the reason, not just "error".
    return ToolResult(text=f"Error: {text}", ok=False, summary=_one_line(text))


def _one_line(text: str) -> str:
    lines = text.strip().splitlines() or [""]
    shown = lines[0] + (" ..." if len(lines) > 1 else "")
    return shown if len(shown) <= _TARGET_CHARS else shown[: _TARGET_CHARS - 3] + "..."


def _patch_target(args: Mapping[str, Any]) -> str:
    names = [n for n in _PATCH_TARGET.findall(str(args.get("patch", ""))) if n != "/dev/null"]
    return ", ".join(dict.fromkeys(names)) or "patch"


def _range_target(args: Mapping[str, Any]) -> str:
    return f"{args.get('path', '')}:{args.get('start_line', '?')}-{args.get('end_line', '?')}"


def _search_target(args: Mapping[str, Any]) -> str:
    where = args.get("path") or "."
    query = str(args.get("query", ""))
    return query if where == "." else f"{query} in {where}"


_TARGETS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "list_files": lambda a: str(a.get("path") or "."),
    "read_file_range": _range_target,
    "search": _search_target,
    "apply_patch": _patch_target,
    "finish": lambda a: str(a.get("status", "")),
}


@attrs.frozen
class CheckedCall:
    """A call of a tool whose arguments fit the tool's schema, with its defaults filled in.
    Made by ``Toolbox.check``; ``Toolbox.run`` runs it without checking it again."""

    name: str
    arguments: Mapping[str, Any]


class Toolbox:
    """An ordered set of tools with unique names; immutable (build another to change them)."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Sequence[Tool]) -> None:
        by_name: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in by_name:
                raise ValueError(f"duplicate tool name: {tool.spec.name}")
            by_name[tool.spec.name] = tool
        self._tools: Mapping[str, Tool] = by_name

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def names(self) -> list[str]:
        return list(self._tools)

    def asks(self, name: str) -> Asks:
        """The tool's own ``asks`` (``never`` for a tool this toolbox does not have)."""
        tool = self._tools.get(name)
        return "never" if tool is None else tool.asks

    @staticmethod
    def may_change_files(name: str) -> bool:
        """Whether a call of ``name`` may change the workspace's files (a checkpoint is
        taken before the first such call of a turn)."""
        return name not in _READ_ONLY

    @staticmethod
    def paths_written(name: str, arguments: Mapping[str, Any]) -> list[str]:
        """The workspace paths a file tool's call names, as the tool reads them (a patch
        that does not parse writes nothing); none for other tools (a command's are not
        known beforehand)."""
        if name in ("write_file", "replace_text") and isinstance(arguments.get("path"), str):
            return [arguments["path"]] if arguments["path"] else []
        if name == "apply_patch" and isinstance(arguments.get("patch"), str):
            try:
                patches = parse_patch(arguments["patch"])
            except ToolError:
                return []
            return [p for fp in patches for p in (fp.old_path, fp.new_path) if p is not None]
        return []

    def target_of(self, name: str, arguments: Mapping[str, Any]) -> str:
        """A short one-line target for a tool card: a path, a command, a query..."""
        pick = _TARGETS.get(name)
        if pick is not None:
            return _one_line(pick(arguments))
        for key in ("path", "command", "query", "target", "to"):
            if isinstance(arguments.get(key), str):
                return _one_line(arguments[key])
        first = next((v for v in arguments.values() if isinstance(v, str)), "")
        return _one_line(first)

    def check(self, name: str, arguments: Mapping[str, Any]) -> CheckedCall | ToolResult:
        """The call ready to run, or the ``Error: ...`` result that answers it instead (an
        unknown tool, arguments that do not fit its schema)."""
        tool = self._tools.get(name)
        if tool is None:
            return self._unknown(name)
        try:
            return CheckedCall(name, check_arguments(tool.spec.parameters, arguments))
        except ToolError as exc:
            return _error(f"invalid arguments for {name}: {exc}")

    async def run(self, call: CheckedCall, ctx: ToolContext) -> ToolResult:
        """Run a checked call; every failure is an ``Error: ...`` result."""
        tool = self._tools.get(call.name)
        if tool is None:  # checked by another toolbox: this one does not have the tool
            return self._unknown(call.name)
        result = await self._run(tool, call.arguments, ctx)
        if not result.ok and not result.text.startswith("Error: "):
            result = attrs.evolve(result, text=f"Error: {result.text}")
        return attrs.evolve(result, text=cap_text(result.text, ctx.output_cap))

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Check and run one call; every failure is an ``Error: ...`` result."""
        checked = self.check(name, arguments)
        if isinstance(checked, ToolResult):
            return checked
        return await self.run(checked, ctx)

    def _unknown(self, name: str) -> ToolResult:
        shown = _one_line(name) or "(empty name)"
        return _error(f"unknown tool {shown}; available: {', '.join(self._tools)}")

    @staticmethod
    async def _run(tool: Tool, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return await tool.run(args, ctx)
        except (ToolError, WorkspaceError) as exc:
            return _error(str(exc))
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            return _error(f"{exc.strerror or exc}{where}")
        except Exception as exc:  # a bug in one tool must not end the turn or the app
            return _error(f"{tool.spec.name} failed: {type(exc).__name__}: {exc}")
