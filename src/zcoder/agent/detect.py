"""Auto-detection of a model server on this machine, for a zcoder given no host.

Every candidate (``servers.KINDS`` on 127.0.0.1: Ollama's ``GET /api/version`` on 11434,
``GET /v1/models`` on 8080, 1234 and 8000) is probed at once, under one short deadline.
The answer is the first candidate in that preference order that answered like its kind,
decided as soon as every candidate before it has failed (so a lone llama.cpp is found as
fast as its port answers), or at the deadline among those that answered by then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import httpx
import trio

from zcoder.agent.servers import GENERIC, KINDS, OLLAMA, Api, ServerKind, kind_from_models

__all__ = ["DEFAULT_CANDIDATES", "Candidate", "Found", "api_at", "detect", "nothing_found"]

_DEADLINE = 1.0
_MAX_BODY = 1024 * 1024


@attrs.frozen
class Candidate:
    """One place a server of ``kind`` may listen."""

    kind: ServerKind
    port: int
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        """The base URL a client of this kind's API uses."""
        base = f"http://{self.host}:{self.port}"
        return base + "/v1" if self.kind.api == "openai" else base

    @property
    def probe_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.kind.probe}"


DEFAULT_CANDIDATES: tuple[Candidate, ...] = tuple(Candidate(k, k.port) for k in KINDS if k.port)


@attrs.frozen
class Found:
    """The server found: its kind (from its answer where it tells), where, and the models
    an OpenAI-compatible one serves (in its order)."""

    kind: ServerKind
    candidate: Candidate
    models: tuple[str, ...] = ()


def _judge(candidate: Candidate, body: Any) -> Found | None:
    """A ``Found`` when the answer is what this kind sends, else ``None``."""
    if not isinstance(body, dict):
        return None
    if candidate.kind.api == "ollama":
        return Found(candidate.kind, candidate) if "version" in body else None
    data = body.get("data")
    if not isinstance(data, list):
        return None
    models = tuple(e["id"] for e in data if isinstance(e, dict) and isinstance(e.get("id"), str))
    return Found(kind_from_models(body) or candidate.kind, candidate, models)


async def _probe(http: httpx.AsyncClient, candidate: Candidate, url: str = "") -> Found | None:
    """Ask ``candidate``'s probe (at ``url`` when given) and judge the answer."""
    try:
        response = await http.get(url or candidate.probe_url)
        if response.status_code != 200 or len(response.content) > _MAX_BODY:
            return None
        return _judge(candidate, response.json())
    except (httpx.HTTPError, ValueError):
        return None


async def detect(
    candidates: Sequence[Candidate] = DEFAULT_CANDIDATES,
    *,
    deadline: float = _DEADLINE,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Found | None:
    """The preferred server that answered, or ``None`` when none did within ``deadline``."""
    results: dict[int, Found | None] = {}
    changed = trio.Event()

    async def run(index: int, candidate: Candidate) -> None:
        nonlocal changed
        results[index] = await _probe(http, candidate)
        changed.set()

    def decided() -> Found | bool | None:
        for index in range(len(candidates)):
            if index not in results:
                return False  # an earlier, preferred candidate may still answer
            if results[index] is not None:
                return results[index]
        return None

    async with (
        httpx.AsyncClient(
            transport=transport, trust_env=False, verify=False, timeout=deadline
        ) as http,
        trio.open_nursery() as nursery,
    ):
        for index, candidate in enumerate(candidates):
            nursery.start_soon(run, index, candidate)
        with trio.move_on_after(deadline):
            while decided() is False:
                await changed.wait()
                changed = trio.Event()
        nursery.cancel_scope.cancel()
    answered = [results.get(i) for i in range(len(candidates))]
    return next((found for found in answered if found is not None), None)


def nothing_found(candidates: Sequence[Candidate] = DEFAULT_CANDIDATES) -> str:
    """The one line saying what was tried and how to point zcoder at a server."""
    tried = ", ".join(f"{c.kind.name} ({c.host}:{c.port})" for c in candidates)
    return (
        f"no model server found (tried {tried}): start one, run a model file with --gguf "
        "FILE (zcoder starts llama.cpp's server for it), or point zcoder at yours with "
        "--host URL (a URL ending in /v1 for an OpenAI-compatible server)"
    )


async def api_at(
    base: str,
    *,
    api_key: str | None = None,
    deadline: float = _DEADLINE,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Api | None:
    """The API a server given without ``/v1`` speaks: ``ollama`` when ``GET
    base/api/version`` answers as Ollama does, else ``openai`` when ``GET base/v1/models``
    lists models (llama.cpp, LM Studio, vLLM), else ``None`` (nothing answered in time, or
    not like either)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(
        transport=transport,
        trust_env=False,
        verify=not base.startswith("http://"),
        timeout=deadline,
        headers=headers,
    ) as http:
        with trio.move_on_after(deadline):
            for kind in (OLLAMA, GENERIC):  # Ollama's probe, then the OpenAI one
                if await _probe(http, Candidate(kind, 0), f"{base}{kind.probe}"):
                    return kind.api
    return None
