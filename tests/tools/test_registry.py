"""Toolbox: registration, validation, error results, caps and display targets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from zcoder.errors import ToolError
from zcoder.tools.base import Tool, ToolContext, ToolResult, ToolSpec
from zcoder.tools.registry import Toolbox, core_tools

CORE = [
    "list_files",
    "read_file",
    "read_file_range",
    "search",
    "write_file",
    "replace_text",
    "apply_patch",
    "run_command",
    "finish",
]


def fake_tool(name: str, behaviour: Any) -> Tool:
    async def run(args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if isinstance(behaviour, BaseException):
            raise behaviour
        if behaviour == "sleep":
            await trio.sleep_forever()
        assert isinstance(behaviour, ToolResult)
        return behaviour

    schema = {"type": "object", "properties": {"to": {"type": "string"}}, "required": []}
    return Tool(ToolSpec(name, f"{name} tool", schema), run)


def test_core_tools_order_and_specs() -> None:
    toolbox = Toolbox(core_tools())
    assert toolbox.names() == CORE
    assert [spec.name for spec in toolbox.specs()] == CORE
    for spec in toolbox.specs():
        params = spec.parameters
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["type"] in {"string", "integer"} and prop["description"]
        json.dumps(spec.to_ollama())
        assert len(spec.description) > 60


def test_tool_names_are_unique() -> None:
    relay = fake_tool("send_agent_message", ToolResult("sent"))
    assert Toolbox([*core_tools(), relay]).names() == [*CORE, "send_agent_message"]
    with pytest.raises(ValueError, match="duplicate tool name: finish"):
        Toolbox([*core_tools(), fake_tool("finish", ToolResult("x"))])


def test_targets() -> None:
    toolbox = Toolbox([*core_tools(), fake_tool("send_agent_message", None)])
    patch = "--- a/x.py\n+++ b/x.py\n@@\n-a\n+b\n--- /dev/null\n+++ b/new.py\n@@\n+c\n"
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("list_files", {}, "."),
        ("list_files", {"path": "src"}, "src"),
        ("read_file", {"path": "a.py"}, "a.py"),
        ("read_file_range", {"path": "a.py", "start_line": 3, "end_line": 9}, "a.py:3-9"),
        ("search", {"query": "def main"}, "def main"),
        ("search", {"query": "x", "path": "src"}, "x in src"),
        ("write_file", {"path": "w.txt", "content": "..."}, "w.txt"),
        ("replace_text", {"path": "r.txt", "old_text": "a", "new_text": "b"}, "r.txt"),
        ("apply_patch", {"patch": patch}, "x.py, new.py"),
        ("apply_patch", {"patch": "garbage"}, "patch"),
        ("run_command", {"command": "make test\necho done"}, "make test ..."),
        ("run_command", {"command": "x" * 300}, "x" * 117 + "..."),
        ("finish", {"status": "complete", "response": "ok"}, "complete"),
        ("send_agent_message", {"to": "peer-1", "message": "hi"}, "peer-1"),
        ("unknown", {"a": 1, "b": "first string"}, "first string"),
        ("unknown", {}, ""),
    ]
    for name, arguments, target in cases:
        assert toolbox.target_of(name, arguments) == target


async def test_unknown_tool_and_bad_arguments(tmp_path: Path) -> None:
    toolbox = Toolbox(core_tools())
    ctx = ToolContext(workspace=tmp_path)
    unknown = await toolbox.call("delete_everything", {}, ctx)
    assert (unknown.ok, unknown.text) == (
        False,
        "Error: unknown tool delete_everything; available: " + ", ".join(CORE),
    )
    extra = await toolbox.call("read_file", {"path": "a", "mode": "r"}, ctx)
    assert extra.text == (
        "Error: invalid arguments for read_file: unknown argument 'mode' (expected: path)"
    )
    not_object = await toolbox.call("read_file", ["a"], ctx)  # type: ignore[arg-type]
    assert not_object.text == (
        "Error: invalid arguments for read_file: arguments must be a JSON object, got array"
    )


async def test_finish(tmp_path: Path) -> None:
    toolbox = Toolbox(core_tools())
    ctx = ToolContext(workspace=tmp_path)
    done = await toolbox.call("finish", {"status": "blocked", "response": "need a key"}, ctx)
    assert (done.ok, done.text, done.summary) == (True, "need a key", "blocked")
    bad = await toolbox.call("finish", {"status": "done", "response": "x"}, ctx)
    assert bad.text == (
        "Error: invalid arguments for finish: argument 'status' must be one of: "
        'complete, blocked; got string "done"'
    )


@pytest.mark.parametrize(
    ("behaviour", "text"),
    [
        (ToolError("nope"), "Error: nope"),
        (
            FileNotFoundError(2, "No such file or directory", "/x"),
            "Error: No such file or directory: /x",
        ),
        (KeyError("boom"), "Error: t failed: KeyError: 'boom'"),
        (ToolResult("plain failure", ok=False), "Error: plain failure"),
        (ToolResult("Error: already prefixed", ok=False), "Error: already prefixed"),
    ],
)
async def test_tool_failures_become_error_results(
    tmp_path: Path, behaviour: Any, text: str
) -> None:
    toolbox = Toolbox([fake_tool("t", behaviour)])
    result = await toolbox.call("t", {}, ToolContext(workspace=tmp_path))
    assert (result.ok, result.text) == (False, text)


async def test_results_are_capped(tmp_path: Path) -> None:
    toolbox = Toolbox([fake_tool("t", ToolResult("x" * 5000, summary="s", diff="d"))])
    result = await toolbox.call("t", {}, ToolContext(workspace=tmp_path, output_cap=500))
    assert len(result.text) == 500 and "characters omitted" in result.text
    assert (result.ok, result.summary, result.diff) == (True, "s", "d")


async def test_cancellation_propagates(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    toolbox = Toolbox([fake_tool("t", "sleep")])
    with trio.move_on_after(5) as scope:
        await toolbox.call("t", {}, ToolContext(workspace=tmp_path))
    assert scope.cancelled_caught


async def test_error_summary_tells_the_user_why(tmp_path: Path) -> None:
    toolbox = Toolbox(core_tools())
    ctx = ToolContext(workspace=tmp_path)
    refused = await toolbox.call("read_file", {"path": "../x"}, ctx)
    assert refused.summary == "path escapes the workspace: ../x"
    invalid = await toolbox.call("read_file", {}, ctx)
    assert invalid.summary == "invalid arguments for read_file: missing required argument 'path'"
    unknown = await toolbox.call("nope", {}, ctx)
    assert unknown.summary.startswith("unknown tool nope; available: list_files")
    assert len(unknown.summary) <= 120
