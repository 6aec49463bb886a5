"""The server zcoder started for ``--gguf`` dies: the failure says it exited (not "is
``llama-server`` running?"), zcoder starts it again once on the same address, and a second
death says how to start it afresh. And a session saved with ``--gguf`` is resumed without it:
the server is started again for the session's file.

Real processes: llama.cpp (xllamacpp) with the SmolLM2 file, killed with SIGKILL as an
out-of-memory kill would. The file is reached through a link of the test's own name, so the
child is found in ``/proc`` by its command line and no other test's server is touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.doubles import make_config
from tests.realmodel.llama_server import STARTED_URL
from tests.realmodel.test_gguf import _children, _listening
from zcoder.agent.connect import make_client
from zcoder.agent.model import ChatRequest, ModelClient
from zcoder.conversation import Message
from zcoder.errors import LocalServerExited
from zcoder.localserver import local_server
from zcoder.prepare import with_gguf

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(240)]


async def _answer(client: ModelClient, model: str) -> str:
    request = ChatRequest(model=model, messages=[Message("user", "Say hi.")], num_predict=8)
    async with client.stream_chat(request) as chunks:
        return "".join([chunk.content async for chunk in chunks])


def _kill_child(gguf: Path) -> None:
    (pid,) = _children(gguf)
    os.kill(pid, signal.SIGKILL)


async def test_a_dead_server_is_said_and_started_again_once(gguf: Path, tmp_path: Path) -> None:
    config = make_config(tmp_path, model="smollm2", context_window=2048, first_token_timeout=120.0)
    config = with_gguf(config, gguf)  # as --gguf makes it
    with local_server(config) as (run_config, own):
        assert own is not None
        async with make_client(run_config) as made:
            client = own.watch(made)
            assert await _answer(client, run_config.model)
            first = _children(gguf)
            _kill_child(gguf)
            with pytest.raises(LocalServerExited) as died:
                await _answer(client, run_config.model)
            said = str(died.value)
            assert said.startswith(
                f"llama.cpp's server for {gguf.name}, which zcoder started, exited "
                "(killed by SIGKILL"
            ), said
            assert re.search(r"zcoder started it again in \d+\.\ds: send the prompt again$", said)
            assert "llama-server" not in said and "is not reachable" not in said
            # The same address answers again: a new child, the same client.
            assert _children(gguf) and _children(gguf) != first
            assert await _answer(client, run_config.model)
            _kill_child(gguf)
            with pytest.raises(LocalServerExited) as again:
                await _answer(client, run_config.model)
            said = str(again.value)
            assert "exited again (killed by SIGKILL" in said, said
            assert "zcoder --resume" in said and not _children(gguf)
    port = int(run_config.host.rsplit(":", 1)[1].split("/")[0])
    assert not _children(gguf) and not _listening(port)


def _oneshot(args: list[str], workspace: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zcoder", "-w", str(workspace), "--no-warmup", *args],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_resume_without_gguf_starts_the_sessions_file_again(gguf: Path, tmp_path: Path) -> None:
    limits = ["--max-output-tokens", "8", "--temperature", "0", "--context-window", "2048"]
    first = _oneshot(["--gguf", str(gguf), *limits, "-p", "Say hi."], tmp_path)
    # Answered, or cut at the output cap (which says so and exits 1): the model ran.
    assert first.returncode in (0, 1), first.stderr
    match = re.search(
        r"^session: (\S+) \(resume with: zcoder --resume \1 --gguf (\S+)\)$", first.stderr, re.M
    )
    assert match and match.group(2) == str(gguf), first.stderr
    sid = match.group(1)
    again = _oneshot(["--resume", sid, *limits, "-p", "Say hi again."], tmp_path)
    assert again.returncode in (0, 1), again.stderr
    assert STARTED_URL.search(again.stderr) and gguf.name in again.stderr, again.stderr
    assert f"resume with: zcoder --resume {sid} --gguf {gguf})" in again.stderr
    assert not _children(gguf)


def test_a_one_shot_run_says_its_server_died_mid_answer(gguf: Path, tmp_path: Path) -> None:
    prompt = "Write a long story about a lighthouse keeper, in many paragraphs."
    argv = [sys.executable, "-m", "zcoder", "-w", str(tmp_path), "--no-warmup", "--gguf"]
    argv += [str(gguf), "--max-output-tokens", "2000", "--context-window", "2048", "-p", prompt]
    with (tmp_path / "stderr").open("w") as stderr:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.read(1), (tmp_path / "stderr").read_text()  # the answer streams
        _kill_child(gguf)
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    said = (tmp_path / "stderr").read_text()
    assert (
        f"zcoder: llama.cpp's server for {gguf.name}, which zcoder started, exited (killed by "
        "SIGKILL"
    ) in said, said
    assert "): run zcoder again, which starts it" in said and "llama-server" not in said
    assert not _children(gguf)
