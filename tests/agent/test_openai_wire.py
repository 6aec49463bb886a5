"""The pure half of the OpenAI client, fed the events a real llama.cpp server sends
(captured from llama.cpp's server, see docs/model-server.rst)."""

from __future__ import annotations

import pytest

from zcoder.agent.model import ChatChunk
from zcoder.agent.openai_sse import SSEEvents
from zcoder.agent.openai_wire import ReplyAssembler
from zcoder.conversation import ToolCall
from zcoder.errors import MalformedStream, StreamErrorLine

HEAD = (
    '"created":1796114848,"id":"chatcmpl-cGFg","model":"/m.gguf","object":"chat.completion.chunk"'
)
LLAMA_TOOL_REPLY = [
    '{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],'
    + HEAD
    + "}",
    '{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,'
    '"id":"CXoEftQCAGjw4paCoIwzEWg7SCjIvFpY","type":"function","function":{"name":"read_file",'
    '"arguments":"{"}}]}}],' + HEAD + "}",
    *(
        '{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"arguments":' + piece + "}}]}}]," + HEAD + "}"
        for piece in [
            '"\\""',
            '"path"',
            '"\\":"',
            '" \\""',
            '"notes"',
            '"."',
            '"txt"',
            '"\\""',
            '"}"',
        ]
    ),
    '{"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],' + HEAD + "}",
    '{"choices":[],' + HEAD + ',"usage":{"completion_tokens":12,"prompt_tokens":36,'
    '"total_tokens":48,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0}}',
    "[DONE]",
]


def feed(texts: list[str]) -> list[ChatChunk]:
    reply = ReplyAssembler()
    return [chunk for text in texts for chunk in reply.data(text)]


def test_llama_cpp_tool_call_deltas_become_one_whole_call() -> None:
    assert feed(LLAMA_TOOL_REPLY) == [
        ChatChunk(
            tool_calls=(
                ToolCall("read_file", {"path": "notes.txt"}, id="CXoEftQCAGjw4paCoIwzEWg7SCjIvFpY"),
            )
        ),
        ChatChunk(done=True, done_reason="tool_calls", prompt_eval_count=36, eval_count=12),
    ]


def test_reasoning_under_either_name_is_thinking() -> None:
    texts = [
        '{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}',
        '{"choices":[{"index":0,"delta":{"reasoning":"m"}}]}',
        '{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}',
        "[DONE]",
    ]
    assert feed(texts)[:3] == [
        ChatChunk(thinking="hm"),
        ChatChunk(thinking="m"),
        ChatChunk(content="ok"),
    ]


def test_a_call_without_a_name_is_malformed() -> None:
    texts = ['{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}', "[DONE]"]
    with pytest.raises(MalformedStream, match="without a function name"):
        feed(texts)


@pytest.mark.parametrize(
    "text", ["[1]", '{"choices": 3}', '{"choices":[{"delta":{"content":5}}]}', "nope"]
)
def test_events_that_are_not_chunks_are_malformed(text: str) -> None:
    with pytest.raises(MalformedStream):
        feed([text])


def test_sse_lines_comments_multiline_data_and_llama_cpp_error_lines() -> None:
    events = SSEEvents()
    got = []
    for line in [
        b": keep-alive",
        b"",
        b'data: {"a":',
        b"data: 1}\r",
        b"",
        b"event: x",
        b"data:[DONE]",
    ]:
        got += events.line(line)
    got += events.end()
    assert got == ['{"a":\n1}', "[DONE]"]
    with pytest.raises(StreamErrorLine, match="failed mid-reply: Loading model"):
        events.line(b'error: {"code":503,"message":"Loading model","type":"unavailable_error"}')
