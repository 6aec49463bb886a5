"""``zcoder -p --output-format json|stream-json`` against the documented schema
(docs/output-format.rst), end to end against the fake Ollama server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.model import ChatChunk
from zcoder.conversation import ToolResult
from zcoder.live import ToolUpdate
from zcoder.oneshot.records import Report
from zcoder.oneshot.usage import MeteredClient, Usage

MODEL = "qwen3-coder:latest"

# The schema of docs/output-format.rst, in a small JSON-Schema-like form: a dict is an
# object whose keys are exactly these (each value the schema of its field); a tuple of
# types is a union; a frozenset lists the allowed values; a list [S] is an array of S.
_NULLABLE_INT = (int, type(None))
STATUSES = frozenset(
    {"answered", "cut_off", "complete", "blocked", "cancelled", "error", "step_limit"}
    | {"loop_stopped"}
)
TOOL_STATES = frozenset(
    {"pending", "running", "completed", "delivered", "failed", "undelivered", "denied"}
    | {"interrupted"}
)
TOOL_RESULT = {"ok": bool, "summary": str, "text": str, "diff": str}
RESULT: dict[str, Any] = {
    "type": frozenset({"result"}),
    "status": STATUSES,
    "answer": str,
    "error": (str, type(None)),
    "exit_code": int,
    "session_id": (str, type(None)),
    "tool_calls": [
        {
            "id": str,
            "name": str,
            "target": str,
            "arguments": Mapping,
            "state": TOOL_STATES,
            "ok": (bool, type(None)),
            "summary": str,
        }
    ],
    "changed_files": [str],
    "usage": {"requests": int, "prompt_tokens": _NULLABLE_INT, "output_tokens": _NULLABLE_INT},
    "duration_ms": int,
}
EVENTS: dict[str, dict[str, Any]] = {
    "start": {
        "type": str,
        "session_id": str,
        "resumed": bool,
        "model": str,
        "server": str,
        "api": frozenset({"ollama", "openai"}),
        "workspace": str,
        "profile": frozenset({"coding", "sysadmin"}),
        "version": str,
    },
    "text": {"type": str, "delta": str},
    "thinking": {"type": str, "delta": str},
    "message": {
        "type": str,
        "role": frozenset({"user", "assistant", "system", "error"}),
        "text": str,
    },
    "tool": {
        "type": str,
        "id": str,
        "name": str,
        "target": str,
        "state": TOOL_STATES,
        "arguments": Mapping,
        "result": (TOOL_RESULT, type(None)),
    },
    "state": {"type": str, "state": str, "detail": str},
    "context": {"type": str, "tokens": int, "window": int, "percent": int},
    "commands_allowed": {"type": str, "allowed": bool},
    "usage": {
        "type": str,
        "requests": int,
        "prompt_tokens": _NULLABLE_INT,
        "output_tokens": _NULLABLE_INT,
    },
    "result": RESULT,
}


def check(value: Any, schema: Any, where: str = "$") -> None:
    """Assert that ``value`` fits ``schema`` (the form described above)."""
    if isinstance(schema, dict):
        assert isinstance(value, dict), f"{where}: {value!r} is not an object"
        assert set(value) == set(schema), f"{where}: keys {sorted(value)} != {sorted(schema)}"
        for key, sub in schema.items():
            check(value[key], sub, f"{where}.{key}")
    elif isinstance(schema, list):
        assert isinstance(value, list), f"{where}: {value!r} is not an array"
        for i, item in enumerate(value):
            check(item, schema[0], f"{where}[{i}]")
    elif isinstance(schema, frozenset):
        assert value in schema, f"{where}: {value!r} is not one of {sorted(schema)}"
    elif isinstance(schema, tuple):
        errors = []
        for option in schema:
            try:
                check(value, option, where)
                return
            except AssertionError as exc:
                errors.append(str(exc))
        raise AssertionError(" / ".join(errors))
    else:
        # bool is an int in Python: a count must not be a boolean
        assert isinstance(value, schema) and not (schema is int and isinstance(value, bool)), (
            f"{where}: {value!r} is not {schema.__name__}"
        )


def check_event(record: Any) -> None:
    assert isinstance(record, dict) and record.get("type") in EVENTS, record
    check(record, EVENTS[record["type"]])


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"chunks": [{"tool_calls": [{"name": name, "arguments": arguments}]}]}


def _say(*pieces: str) -> dict[str, Any]:
    return {"chunks": [{"content": p} for p in pieces]}


def _zcoder(args: Sequence[str], workspace: Path) -> list[str]:
    return [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "ZCODER_MODEL": MODEL}


def _run(
    args: Sequence[str], workspace: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _zcoder(args, workspace),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        start_new_session=True,  # no controlling terminal: approvals are denied
        env=_env(),
    )


def _only_record(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    assert len(lines) == 1 and stdout.endswith("\n"), stdout
    record: dict[str, Any] = json.loads(lines[0])
    check(record, RESULT)
    return record


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    (ws / "b.txt").write_text("one\n")
    return ws


PATCH = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+two\n"
WORK = [
    _tool("read_file", path="a.py"),
    _tool("replace_text", path="./a.py", old_text="x = 1", new_text="x = 2"),
    _tool("apply_patch", patch=PATCH),
    _tool("write_file", path="new/c.txt", content="c\n"),
    _tool("run_command", command="touch made"),
    _say("Done: ", "x is 2."),
]


def test_json_prints_one_result_that_fits_the_schema(workspace: Path) -> None:
    with FakeOllama({"models": [MODEL], "responses": WORK}) as fake:
        done = _run(["--host", fake.url, "--output-format", "json", "-p", "go"], workspace)
    assert done.returncode == 0, done.stderr
    result = _only_record(done.stdout)
    assert (result["status"], result["answer"], result["error"]) == (
        "answered",
        "Done: x is 2.",
        None,
    )
    assert result["exit_code"] == 0
    calls = [(c["name"], c["state"], c["ok"]) for c in result["tool_calls"]]
    assert calls == [
        ("read_file", "completed", True),
        ("replace_text", "completed", True),
        ("apply_patch", "completed", True),
        ("write_file", "completed", True),
        ("run_command", "denied", False),  # no terminal to ask on
    ]
    assert result["tool_calls"][1]["arguments"] == {
        "path": "./a.py",
        "old_text": "x = 1",
        "new_text": "x = 2",
    }
    assert result["tool_calls"][4]["summary"]
    assert result["changed_files"] == ["a.py", "b.txt", "new/c.txt"]
    assert result["usage"]["requests"] == 6
    assert isinstance(result["usage"]["prompt_tokens"], int)
    sessions = Path(os.environ["ZCODER_HOME"]) / "sessions"
    assert list(sessions.glob(f"*/{result['session_id']}.json"))
    # stderr: the denial, and no tool activity, thinking or session line
    assert "no terminal to ask on" in done.stderr
    assert "-> " not in done.stderr and "session:" not in done.stderr


CONSUMER = """\
import json, sys

types = []
last = None
for line in sys.stdin:  # one record per line, as it comes
    last = json.loads(line)
    types.append(last["type"])
    if last["type"] == "tool":
        print("tool", last["name"], last["state"], flush=True)
assert last is not None and last["type"] == "result", last
print("types", " ".join(dict.fromkeys(types)))
print("answer", last["answer"])
print("exit", last["exit_code"])
"""


def test_stream_json_is_consumed_line_by_line(workspace: Path, tmp_path: Path) -> None:
    consumer = tmp_path / "consumer.py"
    consumer.write_text(CONSUMER)
    script = {
        "models": [MODEL],
        "responses": [
            {"chunks": [{"thinking": "hmm"}, *_tool("read_file", path="a.py")["chunks"]]},
            _say("x ", "is ", "1."),
        ],
    }
    with FakeOllama(script) as fake:
        zc = subprocess.Popen(
            _zcoder(["--host", fake.url, "--output-format", "stream-json", "-p", "x?"], workspace),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        assert zc.stdout is not None
        reader = subprocess.run(
            [sys.executable, str(consumer)],
            stdin=zc.stdout,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        zc.stdout.close()
        _out, err = zc.communicate(timeout=30)
    assert zc.returncode == 0, err
    assert reader.returncode == 0, reader.stderr
    lines = reader.stdout.splitlines()
    assert lines[:3] == [
        "tool read_file pending",
        "tool read_file running",
        "tool read_file completed",
    ]
    seen = lines[3].split()[1:]
    assert seen[0] == "start" and seen[-1] == "result"
    assert {"thinking", "text", "message", "state", "usage", "context"} <= set(seen)
    assert lines[4:] == ["answer x is 1.", "exit 0"]


def test_stream_json_records_fit_the_schema(workspace: Path) -> None:
    with FakeOllama({"models": [MODEL], "responses": WORK}) as fake:
        args = ["--host", fake.url, "--output-format", "stream-json", "-p", "go"]
        done = _run(args, workspace)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    for record in records:
        check_event(record)
    assert records[0]["type"] == "start" and records[0]["session_id"] == records[-1]["session_id"]
    assert [r["type"] for r in records].count("result") == 1 and records[-1]["type"] == "result"
    deltas = "".join(r["delta"] for r in records if r["type"] == "text")
    assert deltas == "Done: x is 2."
    finished = [r for r in records if r["type"] == "tool" and r["result"] is not None]
    assert [r["name"] for r in finished][:2] == ["read_file", "replace_text"]
    assert finished[1]["result"]["diff"].startswith("--- a/a.py")
    usage = [r for r in records if r["type"] == "usage"]
    assert [u["requests"] for u in usage] == [1, 2, 3, 4, 5, 6]  # running totals
    assert records[-1]["usage"] == {k: v for k, v in usage[-1].items() if k != "type"}


def test_a_reply_cut_at_the_output_limit_is_not_answered(workspace: Path) -> None:
    cut = {**_say("The first half of "), "done_reason": "length"}
    with FakeOllama({"models": [MODEL], "responses": [cut]}) as fake:
        args = ["--host", fake.url, "--output-format", "json", "--max-output-tokens", "5"]
        done = _run([*args, "-p", "go"], workspace)
    result = _only_record(done.stdout)
    line = "The reply was cut off: the model hit its output limit (5 tokens, --max-output-tokens)."
    assert (result["status"], result["answer"], result["error"]) == (
        "cut_off",
        "The first half of",
        line,
    )
    assert done.returncode == result["exit_code"] == 1
    assert f"zcoder: note: {line}" in done.stderr


def test_ctrl_c_keeps_the_text_that_had_streamed(workspace: Path) -> None:
    slow = {**_say(*(f"w{i} " for i in range(60))), "delay": 0.2}
    with FakeOllama({"models": [MODEL], "responses": [slow]}) as fake:
        args = ["--host", fake.url, "--output-format", "stream-json", "-p", "talk"]
        child = subprocess.Popen(
            _zcoder(args, workspace),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_env(),
        )
        try:
            assert child.stdout is not None
            records: list[dict[str, Any]] = []
            while len([r for r in records if r["type"] == "text"]) < 2:
                records.append(json.loads(child.stdout.readline()))
            child.send_signal(signal.SIGINT)
            out, _err = child.communicate(timeout=20)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    records += [json.loads(line) for line in out.splitlines()]
    result = records[-1]
    check(result, RESULT)
    streamed = "".join(r["delta"] for r in records if r["type"] == "text").strip()
    assert streamed.startswith("w0 w1")
    assert (result["status"], result["answer"], result["exit_code"]) == (
        "cancelled",
        streamed,
        130,
    )


def test_prompt_from_standard_input(workspace: Path) -> None:
    with FakeOllama({"models": [MODEL], "responses": [_say("ok"), _say("ok")]}) as fake:
        text = _run(["--host", fake.url, "-p", "-"], workspace, stdin="line one\nline two\n")
        assert text.returncode == 0, text.stderr
        assert text.stdout == "ok\n"
        assert fake.requests[-1]["messages"][-1]["content"] == "line one\nline two"
        args = ["--host", fake.url, "--output-format", "json", "-p", "-"]
        piped = _run(args, workspace, stdin="from a pipe\n")
        assert fake.requests[-1]["messages"][-1]["content"] == "from a pipe"
    assert piped.returncode == 0, piped.stderr
    assert _only_record(piped.stdout)["answer"] == "ok"


@pytest.mark.parametrize(
    ("data", "message"),
    [("", "standard input is empty"), (" \n\n", "standard input is empty")],
)
def test_empty_standard_input_is_a_usage_error(workspace: Path, data: str, message: str) -> None:
    done = _run(["--output-format", "json", "-p", "-"], workspace, stdin=data)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"zcoder: --prompt -: {message}\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("fmt", ["json", "stream-json"])
def test_server_down_still_ends_with_a_result(workspace: Path, fmt: str) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    text = _run(["--host", url, "-p", "hi"], workspace)
    done = _run(["--host", url, "--output-format", fmt, "-p", "hi"], workspace)
    assert done.returncode == text.returncode == 1
    records = [json.loads(line) for line in done.stdout.splitlines()]
    for record in records:
        check_event(record)
    result = records[-1]
    assert result["type"] == "result"
    assert result["status"] == "error" and result["exit_code"] == 1
    assert result["error"].startswith(f"Ollama is not reachable at {url}")
    assert result["session_id"] is None  # no model answered: nothing to resume
    assert result["answer"] == "" and result["tool_calls"] == []
    assert done.stderr == text.stderr  # the same one line as in text mode


def test_unknown_session_is_a_result_with_the_error(workspace: Path) -> None:
    with FakeOllama({}) as fake:
        args = ["--host", fake.url, "--resume", "nope", "--output-format", "json", "-p", "hi"]
        done = _run(args, workspace)
        assert fake.requests == []
    assert done.returncode == 1
    result = _only_record(done.stdout)
    assert result["status"] == "error" and "nope" in result["error"]
    assert result["session_id"] is None


def test_output_format_needs_a_prompt(workspace: Path) -> None:
    done = _run(["--output-format", "json"], workspace)
    assert done.returncode == 2
    assert done.stderr == "zcoder: --output-format: only applies with --prompt\n"


def test_report_counts_only_what_the_server_reported() -> None:
    usage = Usage()
    usage.add(ChatChunk(done=True))  # a server that says nothing
    assert usage.record() == {"requests": 1, "prompt_tokens": None, "output_tokens": None}
    usage.add(ChatChunk(done=True, prompt_eval_count=10, eval_count=3))
    usage.add(ChatChunk(done=True, prompt_eval_count=5))
    assert usage.record() == {"requests": 3, "prompt_tokens": 15, "output_tokens": 3}


class _TwoChunks:
    """A model client whose replies stream two pieces and would end with counts."""

    @asynccontextmanager
    async def stream_chat(self, request: Any) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        async def chunks() -> AsyncGenerator[ChatChunk]:
            yield ChatChunk(content="a")
            yield ChatChunk(done=True, prompt_eval_count=7, eval_count=1)

        async with aclosing(chunks()) as stream:  # as a real client closes its stream
            yield stream


async def test_a_reply_cut_off_before_its_counts_is_still_a_request() -> None:
    usage = Usage()
    client = MeteredClient(cast(Any, _TwoChunks()), usage.add)
    async with client.stream_chat(cast(Any, None)) as chunks:
        async for chunk in chunks:
            assert chunk.content == "a"
            break  # the loop guard or Escape stops reading here
    assert usage.record() == {"requests": 1, "prompt_tokens": None, "output_tokens": None}
    async with client.stream_chat(cast(Any, None)) as chunks:
        assert [c.done async for c in chunks] == [False, True]  # read whole: counted once
    assert usage.record() == {"requests": 2, "prompt_tokens": 7, "output_tokens": 1}


def test_report_names_changed_files_inside_and_outside_the_workspace(tmp_path: Path) -> None:
    report = Report(tmp_path)
    done = ToolResult("ok")
    report.take(
        ToolUpdate("1", "write_file", "x", "completed", done, {"path": str(tmp_path / "x")})
    )
    report.take(ToolUpdate("2", "write_file", "y", "failed", done, {"path": "y"}))
    report.take(ToolUpdate("3", "replace_text", "z", "completed", done, {"path": "d/../z"}))
    report.take(ToolUpdate("4", "write_file", "/o", "completed", done, {"path": "/elsewhere/o"}))
    moved = "--- a/old.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-a\n+b\n"
    report.take(ToolUpdate("5", "apply_patch", "", "completed", done, {"patch": moved}))
    report.take(ToolUpdate("6", "write_file", "x", "completed", done, {"path": "x"}))
    result = report.result(
        status="answered", answer="", error="", exit_code=0, session_id=None, duration_ms=0
    )
    check(result, RESULT)
    assert result["changed_files"] == ["x", "z", "/elsewhere/o", "old.txt", "new.txt"]
    assert [c["id"] for c in result["tool_calls"]] == ["1", "2", "3", "4", "5", "6"]
