"""Ollama's JSON shapes without I/O: chunk decoding, line splitting, bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zcoder.agent.json_fields import error_text
from zcoder.agent.model import ChatChunk, ChatRequest, ModelInfo
from zcoder.agent.ollama_wire import (
    MAX_LINE_BYTES,
    LineSplitter,
    ShowInfo,
    decode_chat_line,
    decode_models,
    decode_show,
    encode_chat_request,
)
from zcoder.conversation import Message, ToolCall
from zcoder.errors import MalformedStream, StreamErrorLine


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def test_decodes_a_tool_call_chunk_with_id() -> None:
    call = {"id": "call_ab12cd34", "function": {"index": 0, "name": "ls", "arguments": {}}}
    obj = {"message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False}
    assert decode_chat_line(line(obj)) == ChatChunk(
        tool_calls=(ToolCall("ls", {}, "call_ab12cd34"),)
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "a"}', ({"path": "a"}, "")),
        ("", ({}, "")),
        ("not json", ({}, "the arguments are not JSON: not json")),
        ("[1]", ({}, "the arguments are not a JSON object: [1]")),
        (7, ({}, "the arguments are not a JSON object: 7")),
    ],
)
def test_unusable_arguments_are_the_calls_problem(
    arguments: Any, expected: tuple[dict[str, Any], str]
) -> None:
    call = {"function": {"name": "read_file", "arguments": arguments}}
    obj = {"message": {"tool_calls": [call]}, "done": False}
    [decoded] = decode_chat_line(line(obj)).tool_calls
    assert (decoded.name, dict(decoded.arguments), decoded.problem) == ("read_file", *expected)


def test_sampling_options_are_sent_only_when_set() -> None:
    messages = [Message(role="user", content="hi")]
    bare = encode_chat_request(ChatRequest(model="m", messages=messages))
    assert "options" not in bare  # the server's defaults
    full = ChatRequest(model="m", messages=messages, num_ctx=8192, num_predict=512, temperature=0)
    assert encode_chat_request(full)["options"] == {
        "num_ctx": 8192,
        "num_predict": 512,
        "temperature": 0,
    }


def test_null_fields_are_empty() -> None:
    obj = {"message": {"content": None, "thinking": None, "tool_calls": None}, "done": False}
    assert decode_chat_line(line(obj)) == ChatChunk()


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ([1, 2], "not an object"),
        ({"message": {"content": "a"}}, "boolean 'done'"),
        ({"message": {"content": "a"}, "done": "no"}, "boolean 'done'"),
        ({"message": "hi", "done": False}, "'message' is not an object"),
        ({"message": {"content": 3}, "done": False}, "'content' is not a string"),
        ({"message": {"thinking": ["x"]}, "done": False}, "'thinking' is not a string"),
        ({"message": {"tool_calls": {}}, "done": False}, "'tool_calls' is not a list"),
        ({"message": {"tool_calls": [{"name": "ls"}]}, "done": False}, "without a function"),
        ({"message": {"tool_calls": [{"function": {}}]}, "done": False}, "without a function name"),
        ({"done": True, "eval_count": -1}, "'eval_count' is not a count"),
        ({"done": True, "prompt_eval_count": True}, "not a count"),
        ({"done": True, "done_reason": 5}, "'done_reason' is not a string"),
    ],
)
def test_wrong_shapes_are_malformed(obj: Any, match: str) -> None:
    with pytest.raises(MalformedStream, match=match):
        decode_chat_line(line(obj))


def test_non_json_and_non_utf8_lines_are_malformed() -> None:
    with pytest.raises(MalformedStream, match="not JSON: <html>"):
        decode_chat_line(b"<html>")
    with pytest.raises(MalformedStream, match="not JSON"):
        decode_chat_line(b"\xff\xfe{}")


def test_error_line_wins_over_everything() -> None:
    with pytest.raises(StreamErrorLine, match="mid-reply: boom"):
        decode_chat_line(line({"error": "boom", "done": False}))


@given(
    # Surrogates cannot be encoded: no server can send them.
    lines=st.lists(
        st.text(alphabet=st.characters(exclude_characters="\n", codec="utf-8")),
        max_size=8,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_line_splitter_is_independent_of_network_splits(lines: list[str], cuts: list[int]) -> None:
    data = "".join(f"{text}\n" for text in lines).encode()
    points = sorted({c for c in cuts if c < len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    splitter = LineSplitter()
    got = [out for piece in pieces for out in splitter.feed(piece)]
    assert got == [text.encode() for text in lines]
    assert splitter.tail() == b""


def test_line_splitter_tail_and_limit() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert splitter.feed(b": 2}") == []
    assert splitter.tail() == b'{"b": 2}'
    with pytest.raises(MalformedStream, match="line over"):
        splitter.feed(b"x" * (MAX_LINE_BYTES + 1))


def test_decode_models() -> None:
    body = {
        "models": [
            {"name": "a:latest", "size": 5, "details": {"parameter_size": "7B"}},
            {"model": "b:1b", "details": None},
        ]
    }
    assert decode_models(body) == [ModelInfo("a:latest", 5, "7B", ""), ModelInfo("b:1b")]
    with pytest.raises(MalformedStream, match="no 'models' list"):
        decode_models({"error": "x"})
    with pytest.raises(MalformedStream, match="without a name"):
        decode_models({"models": [{"size": 1}]})


def test_decode_show_finds_context_length_and_capabilities() -> None:
    body = {
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
        "details": {"family": "llama", "parameter_size": "8B"},
    }
    assert decode_show(body, "m") == ShowInfo(
        "m", 131072, frozenset({"completion", "tools"}), "llama", "8B"
    )
    assert decode_show({}, "m") == ShowInfo("m")


def test_error_text() -> None:
    assert error_text(b'{"error": "model is required"}') == "model is required"
    assert error_text(b"404 page not found\n") == "404 page not found"
    assert error_text(b"") == "(empty answer)"
    assert error_text(b"x" * 500).endswith("...")
