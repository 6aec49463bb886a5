"""End to end: ``zcoder -p`` as a real subprocess against the fake Ollama server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.agent.doubles import make_config
from tests.fakes.ollama_server import FakeOllama
from zcoder.agent.loop import STOP_MARKER
from zcoder.conversation import Message
from zcoder.oneshot.output import resume_line
from zcoder.session.store import SessionStore

MODEL = "qwen3-coder:latest"


def _tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"chunks": [{"tool_calls": [{"name": name, "arguments": arguments}]}]}


def _say(*pieces: str, delay: float = 0.0) -> dict[str, Any]:
    return {"chunks": [{"content": p} for p in pieces], "delay": delay}


def _zcoder(args: Sequence[str], workspace: Path) -> list[str]:
    return [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup", *args]


def _run(
    args: Sequence[str], workspace: Path, *, new_session: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _zcoder(args, workspace),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=new_session,  # no controlling terminal: approvals are denied
        env={**os.environ, "ZCODER_MODEL": MODEL},
    )


def _session_id(stderr: str) -> str:
    match = re.search(r"^session: (\S+) \(resume with: zcoder --resume \1\)$", stderr, re.M)
    assert match, stderr
    return match.group(1)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\nprint('x is', x)\n")
    return ws


def test_multi_step_turn_then_resume(workspace: Path) -> None:
    script = {
        "models": [MODEL],
        "responses": [
            _tool("read_file", path="a.py"),
            _tool("replace_text", path="a.py", old_text="x = 1", new_text="x = 2"),
            _tool("run_command", command=f"{sys.executable} a.py"),
            _tool("finish", status="complete", response="x is now 2."),
        ],
    }
    with FakeOllama(script) as fake:
        done = _run(["--host", fake.url, "--yes", "-p", "set x to 2"], workspace)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "x is now 2.\n"
        assert (workspace / "a.py").read_text() == "x = 2\nprint('x is', x)\n"
        assert "-> run_command" in done.stderr
        first_requests = list(fake.requests)
        assert len(first_requests) == 4
        last_tool = first_requests[3]["messages"][-1]
        assert last_tool["role"] == "tool" and "x is 2" in last_tool["content"]
        sid = _session_id(done.stderr)

        fake.set_script({"models": [MODEL], "responses": [_say("Still ", "here.")]})
        again = _run(["--host", fake.url, "--resume", sid, "-p", "and now?"], workspace)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "Still here.\n"
        assert _session_id(again.stderr) == sid
        messages = fake.requests[-1]["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert messages[1]["content"] == "set x to 2"
        assert (messages[-1]["role"], messages[-1]["content"]) == ("user", "and now?")
        # system, first turn (ended by finish's result), an empty reply, new prompt: strict
        # chat templates refuse a user message after a user-side one
        assert messages[-2] == {"role": "assistant", "content": ""}
        assert len(messages) == 1 + 9 + 1 + 1


def test_streamed_answer_and_thinking(workspace: Path) -> None:
    script = {
        "responses": [
            {"chunks": [{"thinking": "pondering"}, {"content": "Hi "}, {"content": "there"}]}
        ]
    }
    with FakeOllama(script) as fake:
        done = _run(["--host", fake.url, "-p", "hello"], workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hi there\n"
    assert "pondering" in done.stderr


def test_without_a_terminal_commands_are_denied(workspace: Path) -> None:
    script = {
        "models": [MODEL],
        "responses": [_tool("run_command", command="touch made"), _say("ok")],
    }
    with FakeOllama(script) as fake:
        done = _run(["--host", fake.url, "-p", "make a file"], workspace, new_session=True)
        assert done.returncode == 0, done.stderr
        assert not (workspace / "made").exists()
        assert "no terminal to ask on" in done.stderr
        tool_result = fake.requests[1]["messages"][-1]
        assert tool_result["content"] == "user denied command: touch made"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_down_is_one_line_and_exit_1(workspace: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    done = _run(["--host", url, "-p", "hi"], workspace)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert re.fullmatch(
        rf"zcoder: Ollama is not reachable at {re.escape(url)} \(\w[^()]*\): "
        r"is `ollama serve` running\? \(or point --host at the server that runs\)",
        lines[0],
    ), lines[0]
    # no model answered: no session is left behind and none is offered to resume
    assert len(lines) == 1
    assert not list((Path(os.environ["ZCODER_HOME"]) / "sessions").glob("*/[0-9]*.json"))


def test_missing_model_says_pull(workspace: Path) -> None:
    with FakeOllama({"models": ["other:latest"]}) as fake:
        done = _run(["--host", fake.url, "-p", "hi"], workspace)
    assert done.returncode == 1
    assert f"zcoder: model '{MODEL}' not found on Ollama: run `ollama pull {MODEL}`" in done.stderr


def test_unknown_resume_id_changes_nothing(workspace: Path, isolated_env: Path) -> None:
    with FakeOllama({}) as fake:
        done = _run(["--host", fake.url, "--resume", "nope", "-p", "hi"], workspace)
        assert fake.requests == []
    assert done.returncode == 1
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert "nope" in done.stderr


def test_ctrl_c_during_a_slow_stream_exits_130(workspace: Path) -> None:
    slow = _say(*(["word "] * 50), delay=0.2)
    with FakeOllama({"models": [MODEL], "responses": [slow]}) as fake:
        child = subprocess.Popen(
            _zcoder(["--host", fake.url, "-p", "talk"], workspace),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "ZCODER_MODEL": MODEL},
        )
        try:
            assert child.stdout is not None
            assert child.stdout.read(5) == "word "  # streaming has begun
            child.send_signal(signal.SIGINT)
            _out, err = child.communicate(timeout=20)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 130, err
    sid = _session_id(err)
    store = SessionStore(Path(os.environ["ZCODER_HOME"]), workspace, "coding")
    session = store.open(sid)
    try:
        assert [m.content for m in session.history] == ["talk", STOP_MARKER]
    finally:
        store.release(session)


def test_approval_is_asked_on_the_terminal(workspace: Path) -> None:
    import pexpect

    script = {
        "models": [MODEL],
        "responses": [
            _tool("run_command", command="printf ran > out.txt # \x1b[2J"),
            _tool("run_command", command="touch second"),
            _say("All done."),
        ],
    }
    with FakeOllama(script) as fake:
        child = pexpect.spawn(
            _zcoder(["--host", fake.url, "-p", "run it"], workspace)[0],
            _zcoder(["--host", fake.url, "-p", "run it"], workspace)[1:],
            env={**os.environ, "ZCODER_MODEL": MODEL},
            encoding="utf-8",
            timeout=20,
        )
        try:
            child.expect_exact(f"The model wants to run this command in {workspace}:")
            # the escape byte is shown, never sent to the terminal raw
            child.expect_exact("printf ran > out.txt # ^[[2J")
            child.expect_exact(
                "[y = yes, once, a = yes to all commands of this conversation, n = no] "
            )
            child.sendline("maybe")
            child.expect_exact("Please answer y/a/n: ")
            child.sendline("n")
            child.expect_exact("touch second")
            child.sendline("y")
            child.expect_exact("All done.")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0
        assert not (workspace / "out.txt").exists()
        assert (workspace / "second").exists()
        assert fake.requests[1]["messages"][-1]["content"].startswith("user denied command: printf")


def test_locked_session_is_refused(workspace: Path) -> None:
    store = SessionStore(Path(os.environ["ZCODER_HOME"]), workspace, "coding")
    held = store.create(MODEL)
    held.history += [Message("user", "q"), Message("assistant", "a")]
    store.save(held)
    try:
        with FakeOllama({"models": [MODEL]}) as fake:
            done = _run(["--host", fake.url, "--resume", held.id, "-p", "hi"], workspace)
            assert fake.requests == []
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and "zcoder: " in done.stderr
        assert done.stdout == ""
    finally:
        store.release(held)
    reopened = store.open(held.id)
    assert reopened.history == held.history and reopened.user_requests == []
    store.release(reopened)


def test_stdout_reader_going_away_does_not_break_the_turn(workspace: Path) -> None:
    pieces = ["word "] * 40
    with FakeOllama({"models": [MODEL], "responses": [_say(*pieces, delay=0.01)]}) as fake:
        child = subprocess.Popen(
            _zcoder(["--host", fake.url, "-p", "talk"], workspace),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "ZCODER_MODEL": MODEL},
        )
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.read(5) == b"word "
        child.stdout.close()  # like `zcoder -p ... | head -c 5`
        err = child.stderr.read().decode()
        child.stderr.close()
        assert child.wait(timeout=20) == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err
    store = SessionStore(Path(os.environ["ZCODER_HOME"]), workspace, "coding")
    session = store.open(_session_id(err))
    try:
        assert session.history[-1].content == "".join(pieces)
    finally:
        store.release(session)


def test_a_session_counts_as_saved_once_a_model_answered(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "home", tmp_path, "coding")
    session = store.create(MODEL)
    assert not store.is_saved(session.id)
    session.history.append(Message("user", "q"))
    store.save(session)
    assert not store.is_saved(session.id)  # no model answered: nothing to resume
    session.history.append(Message("assistant", "a"))
    store.save(session)
    assert store.is_saved(session.id)
    store.release(session)


def test_the_resume_line_names_the_gguf_file_of_a_run_that_started_its_server(
    tmp_path: Path,
) -> None:
    plain = make_config(tmp_path)
    assert resume_line(plain, "1-2") == "session: 1-2 (resume with: zcoder --resume 1-2)\n"
    gguf = attrs.evolve(plain, gguf=tmp_path / "my models" / "m.gguf")
    assert resume_line(gguf, "1-2") == (
        f"session: 1-2 (resume with: zcoder --resume 1-2 --gguf '{tmp_path}/my models/m.gguf')\n"
    )


def test_debug_log_records_the_turn(workspace: Path, tmp_path: Path) -> None:
    script = {"models": [MODEL], "responses": [_tool("read_file", path="a.py"), _say("ok")]}
    log = tmp_path / "debug.log"
    with FakeOllama(script) as fake:
        done = _run(["--host", fake.url, "--debug-log", str(log), "-p", "go"], workspace)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert "zcoder.agent.rounds: tool read_file completed (a.py): 2 lines" in text
    assert "zcoder.agent.loop: model reply: 2 chars, 0 tool calls, done_reason 'stop'" in text


def test_unwritable_debug_log_is_a_usage_error(workspace: Path, tmp_path: Path) -> None:
    done = _run(["--debug-log", str(tmp_path / "no" / "log"), "-p", "go"], workspace)
    assert done.returncode == 2
    assert done.stderr == (
        f"zcoder: --debug-log: cannot write {tmp_path / 'no' / 'log'}: No such file or directory\n"
    )


def test_resume_keeps_the_sessions_model_unless_m_is_given(workspace: Path) -> None:
    other = "other:1b"
    script = {"models": [MODEL, other], "responses": [_say("ok")]}
    with FakeOllama(script) as fake:
        first = _run(["--host", fake.url, "-p", "hi"], workspace)
        sid = _session_id(first.stderr)
        env_only = subprocess.run(
            _zcoder(["--host", fake.url, "--resume", sid, "-p", "again"], workspace),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "ZCODER_MODEL": other},
        )
        assert env_only.returncode == 0, env_only.stderr
        assert fake.requests[-1]["model"] == MODEL  # the environment does not override
        flagged = _run(["--host", fake.url, "-m", other, "--resume", sid, "-p", "x"], workspace)
        assert flagged.returncode == 0, flagged.stderr
        assert fake.requests[-1]["model"] == other
        again = _run(["--host", fake.url, "--resume", sid, "-p", "y"], workspace)
        assert again.returncode == 0, again.stderr
        assert fake.requests[-1]["model"] == other  # recorded in the session


def test_one_shot_never_joins_the_relay(workspace: Path) -> None:
    """No manifest or socket while the turn runs, and no relay tools offered to the model."""
    relay_dir = Path(os.environ["ZCODER_RELAY_DIR"])
    script = {"models": [MODEL], "responses": [_say("one ", "two ", "three", delay=0.3)]}
    with FakeOllama(script) as fake:
        child = subprocess.Popen(
            _zcoder(["--host", fake.url, "-p", "count"], workspace),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "ZCODER_MODEL": MODEL},
        )
        seen: set[str] = set()
        while child.poll() is None:  # sampled for the whole turn (about a second)
            if relay_dir.exists():
                seen.update(p.name for p in relay_dir.iterdir())
            time.sleep(0.02)
        out, _ = child.communicate(timeout=30)
        requests = list(fake.requests)
    assert child.returncode == 0 and out.strip() == "one two three"
    assert seen == set()
    tool_names = {t["function"]["name"] for t in requests[0]["tools"]}
    assert "run_command" in tool_names
    assert not tool_names & {"list_agents", "send_agent_message"}
