"""A script's JSON ``error`` names the server that answered: llama.cpp for llama.cpp, never
Ollama (end to end, ``zcoder -p`` against the fake OpenAI-compatible server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI

MODEL = "smollm2:135m"


def test_json_error_of_a_cut_reply_names_llama_cpp(tmp_path: Path) -> None:
    response = {"chunks": [{"content": "half an ans"}], "no_done": True}
    with FakeOpenAI({"models": [MODEL], "responses": [response]}) as fake:
        args = ["--host", fake.url + "/v1", "--output-format", "json", "-p", "hi"]
        done = subprocess.run(
            [sys.executable, "-m", "zcoder", "-w", str(tmp_path), "--no-warmup", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error.startswith("the reply from llama.cpp ended early"), error
    assert "ollama" not in error.lower()
