"""Tool calls printed as text: telling them from an answer while it streams, and reading
them (JSON, the ``<tool_call>`` wrapper, the XML form) once the reply is complete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from zcoder.agent.printed_calls import PrintedCalls, may_be_printed_call, printed_tool_calls
from zcoder.conversation import ToolCall


@pytest.mark.parametrize(
    "start",
    ["", "  ", "{", '{ "na', '{"name": "read_file"', "`", "```", "```json\n{", "```\n", "<tool"],
)
def test_starts_that_may_become_a_call(start: str) -> None:
    assert may_be_printed_call(start)


@pytest.mark.parametrize(
    "start", ["Hello", "{}", "{ x", '{"path": 1}', "```python", "```json\nx", "<b>", "1 {"]
)
def test_starts_that_cannot(start: str) -> None:
    assert not may_be_printed_call(start)


@pytest.mark.parametrize("start", ["<function=read_file>", "<func", "<tool_call>\n<function="])
def test_the_xml_form_may_become_a_call(start: str) -> None:
    assert may_be_printed_call(start)


SCHEMAS: dict[str, Mapping[str, Any]] = {
    "read_file": {"type": "object", "properties": {"path": {"type": "string"}}},
    "run_command": {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_seconds": {"type": "integer"},
            "background": {"type": ["boolean", "null"]},
            "ratio": {"type": "number"},
            "env": {"type": "object"},
            "args": {"type": "array"},
        },
    },
}
READ = ToolCall("read_file", {"path": "a.py"})


@pytest.mark.parametrize(
    "printed",
    [
        '{"name": "read_file", "arguments": {"path": "a.py"}}',
        '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
        '<tool_call>\n{"name": "read_file", "parameters": {"path": "a.py"}}\n</tool_call>',
        '{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}',
        "<function=read_file>\n<parameter=path>\na.py\n</parameter>\n</function>",
        "<tool_call>\n<function=read_file>\n<parameter=path>\na.py\n</parameter>\n"
        "</function>\n</tool_call>",
        # qwen3-coder sometimes leaves a parameter unclosed before the next one or the end
        "<function=read_file><parameter=path>\na.py\n</function>",
    ],
)
def test_a_whole_reply_that_is_one_call(printed: str) -> None:
    assert printed_tool_calls(printed, SCHEMAS) == PrintedCalls((READ,))


def test_several_tagged_calls_with_text_around_them() -> None:
    reply = (
        "I will read it first.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n'
        "<tool_call>\n<function=run_command>\n<parameter=command>\npytest -q\n</parameter>\n"
        "</function>\n</tool_call>\nThen I will report."
    )
    found = printed_tool_calls(reply, SCHEMAS)
    assert found == PrintedCalls(
        (READ, ToolCall("run_command", {"command": "pytest -q"})),
        "I will read it first.\n\nThen I will report.",
    )


def test_xml_values_take_the_schema_types() -> None:
    reply = (
        "<function=run_command>\n<parameter=command>\nsleep 1\n</parameter>\n"
        "<parameter=timeout_seconds>\n30\n</parameter>\n<parameter=background>\nFalse\n"
        "</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n<parameter=env>\n"
        '{"A": "1"}\n</parameter>\n<parameter=args>\n["-x"]\n</parameter>\n</function>'
    )
    found = printed_tool_calls(reply, SCHEMAS)
    assert found is not None
    assert found.calls[0].arguments == {
        "command": "sleep 1",
        "timeout_seconds": 30,
        "background": False,
        "ratio": 0.5,
        "env": {"A": "1"},
        "args": ["-x"],
    }


def test_xml_values_that_do_not_read_as_their_type_stay_text() -> None:
    # The tool then refuses them with its own error, which the model can act on.
    reply = (
        "<function=run_command><parameter=timeout_seconds>soon</parameter>"
        "<parameter=background>maybe</parameter><parameter=env>[1]</parameter></function>"
    )
    found = printed_tool_calls(reply, SCHEMAS)
    assert found is not None
    assert found.calls[0].arguments == {
        "timeout_seconds": "soon",
        "background": "maybe",
        "env": "[1]",
    }


def test_multiline_string_values_keep_their_inner_lines() -> None:
    reply = (
        "<function=read_file>\n<parameter=path>\n\nline one\nline two\n\n</parameter>\n</function>"
    )
    found = printed_tool_calls(reply, SCHEMAS)
    assert found is not None and found.calls[0].arguments == {"path": "\nline one\nline two\n"}


@pytest.mark.parametrize(
    "answer",
    [
        '{"name": "unknown_tool", "arguments": {}}',
        'Use {"name": "read_file", "arguments": {"path": "a.py"}} to read it.',
        '{"name": "read_file", "arguments": {"path": "a.py"}, "extra": 1}',
        '{"name": "read_file", "arguments": [1]}',
        "{not json}",
        "plain text",
        "<function=unknown_tool><parameter=x>1</parameter></function>",
        # one unknown tool among known ones: none is taken
        '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>'
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        "<tool_call>not a call</tool_call>",
        '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}',  # never closed
    ],
)
def test_ordinary_answers_are_not_tool_calls(answer: str) -> None:
    assert printed_tool_calls(answer, SCHEMAS) is None
