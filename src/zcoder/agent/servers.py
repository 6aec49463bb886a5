"""The model servers zcoder knows: what each is called, where it listens by default, which
API it speaks, and what to tell a user whose server is not running or lacks the model.

Pure data and text; the probing is in ``agent/detect.py``, the clients in
``agent/ollama.py`` and ``agent/openai.py``. Every message that names a fix takes it from
here, so a llama.cpp user is never told to run ``ollama pull``.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = [
    "GENERIC",
    "KINDS",
    "Api",
    "ServerKind",
    "kind_from_models",
    "kind_named",
    "missing_model_fix",
    "start_fix",
]

Api = Literal["ollama", "openai"]
GENERIC = "OpenAI-compatible server"


@attrs.frozen
class ServerKind:
    """One kind of model server; ``probe`` is the path that tells it is there."""

    name: str
    api: Api
    port: int
    probe: str
    start: str  # how to start it, as a question
    get_model: str  # how to get a missing model; ``{model}`` is replaced


# The order is the preference order of auto-detection.
KINDS: tuple[ServerKind, ...] = (
    ServerKind(
        "Ollama",
        "ollama",
        11434,
        "/api/version",
        "is `ollama serve` running?",
        "run `ollama pull {model}`",
    ),
    ServerKind(
        "llama.cpp",
        "openai",
        8080,
        "/v1/models",
        "is `llama-server -m MODEL.gguf` running?",
        "llama.cpp serves the model it was started with (`llama-server -m FILE.gguf`)",
    ),
    ServerKind(
        "LM Studio",
        "openai",
        1234,
        "/v1/models",
        "is LM Studio's server running (`lms server start`)?",
        "load it in LM Studio (`lms load {model}`)",
    ),
    ServerKind(
        "vLLM",
        "openai",
        8000,
        "/v1/models",
        "is `vllm serve MODEL` running?",
        "vLLM serves only the model it was started with (`vllm serve {model}`)",
    ),
)
_GENERIC_START = "is the server running?"
_GENERIC_MODEL = "the server does not serve it"
# ``owned_by`` of GET /v1/models, as each server fills it in.
_OWNERS = {"llamacpp": "llama.cpp", "vllm": "vLLM", "library": "Ollama", "ollama": "Ollama"}


def kind_named(name: str) -> ServerKind | None:
    return next((k for k in KINDS if k.name == name), None)


def kind_from_models(body: Any) -> str:
    """The server kind a ``GET /v1/models`` answer gives away, or ``""``.

    llama.cpp says ``owned_by: "llamacpp"``, vLLM ``"vllm"``, Ollama ``"library"``; LM
    Studio says ``"organization_owner"``, which is not its own, so it is told by its
    ``/api/v0`` API instead (see ``agent/openai.py``).
    """
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return ""
    for entry in entries:
        owner = entry.get("owned_by") if isinstance(entry, dict) else None
        if isinstance(owner, str) and owner.lower() in _OWNERS:
            return _OWNERS[owner.lower()]
    return ""


def start_fix(kind: str) -> str:
    """What to check when nothing answers: ``is `ollama serve` running?`` and the like."""
    known = kind_named(kind)
    return known.start if known else _GENERIC_START


def missing_model_fix(kind: str, model: str) -> str:
    """How to get ``model`` onto a server of this kind, ending with ``/model``."""
    known = kind_named(kind)
    how = known.get_model.format(model=model) if known else _GENERIC_MODEL
    return f"{how}, or pick a served model with /model"
