"""``--gguf FILE`` before any server starts: the checks of the file and of the flags it
cannot be combined with (one line, exit 2), the missing extra (one line, exit 1), the
settings it implies, and the child's promise to die with its parent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.localserver.test_gguf_facts import ARCH, CONTEXT, gguf_bytes
from zcoder.cli import main
from zcoder.config import RawOptions, load_config
from zcoder.errors import ConfigError
from zcoder.localserver import EXTRA_MISSING

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.Q4.gguf"
    path.write_bytes(gguf_bytes(ARCH, CONTEXT))
    return path


def test_the_server_is_its_own_and_the_model_is_the_file(model: Path, tmp_path: Path) -> None:
    env = {"ZCODER_HOST": "gpu:1", "ZCODER_API": "ollama", "ZCODER_MODEL": "qwen3-coder"}
    c = load_config(RawOptions(gguf=str(model), workspace=str(tmp_path)), env)
    assert (c.gguf, c.api, c.api_given, c.autodetect) == (model, "openai", True, False)
    assert (c.model, c.model_default, c.host) == ("tiny-model.Q4", False, "")
    c = load_config(RawOptions(gguf=str(model), model="mine", workspace=str(tmp_path)), env)
    assert c.model == "mine"


def test_not_with_host_or_api(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="--gguf: cannot be combined with --host"):
        load_config(RawOptions(gguf=str(model), host=":8080"), {})
    assert main(["--gguf", str(model), "--api", "openai", "-p", "hi"]) == 2
    said = "zcoder: --gguf: cannot be combined with --api: it starts its own server\n"
    assert capsys.readouterr().err == said


def test_a_file_that_is_no_model_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    cases = {
        str(tmp_path / "missing.gguf"): "does not exist",
        str(tmp_path): "is not a regular file",
        str(fifo): "is not a regular file",  # refused before opening: no blocking read
        str(text): "is not a GGUF model file",
    }
    for path, problem in cases.items():
        assert main(["--gguf", path, "-p", "hi"]) == 2
        err = capsys.readouterr().err
        assert err == f"zcoder: --gguf: {path!r} {problem}\n"


def test_without_the_extra_one_line_and_exit_1(model: Path, tmp_path: Path) -> None:
    hide = (
        "import sys; sys.modules['xllamacpp'] = None; from zcoder.cli import main; "
        f"raise SystemExit(main(['--gguf', {str(model)!r}, '-w', {str(tmp_path)!r}, '-p', 'hi']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide], capture_output=True, text=True, timeout=30, check=False
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"zcoder: {EXTRA_MISSING}\n"
    assert EXTRA_MISSING == "--gguf needs the local extra: pip install 'zcoder[local]'"


def test_zcoder_config_names_the_file(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--gguf", str(model)]) == 0
    out = capsys.readouterr().out
    assert f"llama.cpp started for {model}" in out
    assert "api                      openai" in out
    assert out.count("flag --gguf") == 3  # model, host, api


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_dies_with_its_parent(tmp_path: Path) -> None:
    # A parent that starts a stand-in child (the real child's first step, then a sleep
    # with stdin kept open elsewhere) and prints its pid; killed with SIGKILL, it cleans
    # nothing up, and the kernel must take the child with it.
    # The parent's pid is passed, as the real child's --parent is: a parent killed before
    # the child's first step is noticed too (a loaded machine may take that long).
    child = (
        "import sys, time; from zcoder.localserver.child import _die_with_parent; "
        "_die_with_parent(int(sys.argv[1])); time.sleep(60)"
    )
    parent = (
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())], "
        "start_new_session=True); "
        "print(p.pid, flush=True); time.sleep(60)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    time.sleep(0.5)  # the child has run its first step
    assert Path(f"/proc/{pid}").exists()
    proc.kill()
    proc.wait()
    proc.stdout.close()
    end = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < end, "the child outlived its parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie is dead, waiting for init to reap it
