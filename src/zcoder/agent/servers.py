"""The model servers zcoder knows: each kind's name, where it listens by default, which API
it speaks, how it gives itself away, how it reports its context window, how it treats the
model name asked for, and what to tell a user whose server is not running or lacks the
model.

Pure data and text; the probing is in ``agent/detect.py``, the clients in
``agent/ollama.py`` and ``agent/openai.py``. Code that behaves differently for a kind reads
that kind's fields, never its name, and every message names the kind in use from here, so a
llama.cpp user is never told to run ``ollama pull``. Adding an OpenAI-compatible kind is one
row of ``KINDS``.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = [
    "GENERIC",
    "KINDS",
    "LLAMA_CPP",
    "OLLAMA",
    "Api",
    "ServerKind",
    "WindowReport",
    "default_kind",
    "kind_from_models",
    "kind_named",
]

Api = Literal["ollama", "openai"]
# Where an OpenAI-compatible server reports the window it runs a model with:
# "n_ctx": ``meta.n_ctx`` in ``/v1/models``, else ``GET /props`` (llama.cpp);
# "loaded_context_length": its own ``/api/v0/models/NAME`` (LM Studio);
# "api_ps": the loaded model's ``context_length`` in ``/api/ps`` (Ollama through ``/v1``);
# "max_model_len": the model's entry in ``/v1/models`` (vLLM, and any other that says).
WindowReport = Literal["n_ctx", "loaded_context_length", "api_ps", "max_model_len"]


@attrs.frozen
class ServerKind:
    """One kind of model server.

    ``port`` is where auto-detection looks for it (0: nowhere); ``probe`` the path that
    tells it is there; ``owners`` the ``owned_by`` values of its ``GET /v1/models`` that
    give it away, and ``own_api`` a path of its own API that does when they cannot.
    ``serves_any_name``: it answers with the model it was started with whatever name is
    asked (llama.cpp); ``loads_by_name``: it serves any model it has by name, so its one
    listed model is never taken for the one asked (Ollama).
    """

    name: str
    api: Api
    port: int
    probe: str
    start: str  # how to start it, as a question
    get_model: str  # how to get a missing model; ``{model}`` is replaced
    window: WindowReport = "max_model_len"
    owners: tuple[str, ...] = ()
    own_api: str = ""
    serves_any_name: bool = False
    loads_by_name: bool = False

    def missing_model_fix(self, model: str) -> str:
        """How to get ``model`` onto a server of this kind, ending with ``/model``."""
        return f"{self.get_model.format(model=model)}, or pick a served model with /model"


OLLAMA = ServerKind(
    "Ollama",
    "ollama",
    11434,
    "/api/version",
    "is `ollama serve` running?",
    "run `ollama pull {model}`",
    window="api_ps",
    owners=("library", "ollama"),
    loads_by_name=True,
)
LLAMA_CPP = ServerKind(
    "llama.cpp",
    "openai",
    8080,
    "/v1/models",
    "is `llama-server -m MODEL.gguf` running?",
    "llama.cpp serves the model it was started with (`llama-server -m FILE.gguf`)",
    window="n_ctx",
    owners=("llamacpp",),
    serves_any_name=True,
)
# Any other OpenAI-compatible server: what is true of them all.
GENERIC = ServerKind(
    "OpenAI-compatible server",
    "openai",
    0,
    "/v1/models",
    "is the server running?",
    "the server does not serve it",
)

# The order is the preference order of auto-detection.
KINDS: tuple[ServerKind, ...] = (
    OLLAMA,
    LLAMA_CPP,
    ServerKind(
        "LM Studio",
        "openai",
        1234,
        "/v1/models",
        "is LM Studio's server running (`lms server start`)?",
        "load it in LM Studio (`lms load {model}`)",
        window="loaded_context_length",
        own_api="/api/v0/models",  # its /v1 says "organization_owner", not its own name
    ),
    ServerKind(
        "vLLM",
        "openai",
        8000,
        "/v1/models",
        "is `vllm serve MODEL` running?",
        "vLLM serves only the model it was started with (`vllm serve {model}`)",
        owners=("vllm",),
    ),
)


def kind_named(name: str) -> ServerKind | None:
    """The kind of this display name (the generic kind included), or ``None``."""
    return next((k for k in (*KINDS, GENERIC) if k.name == name), None)


def default_kind(api: Api) -> ServerKind:
    """The kind assumed for an API before the server says more: Ollama for its own API."""
    return OLLAMA if api == "ollama" else GENERIC


def kind_from_models(body: Any) -> ServerKind | None:
    """The server kind a ``GET /v1/models`` answer gives away (its ``owned_by``), or
    ``None``: llama.cpp says ``llamacpp``, vLLM ``vllm``, Ollama ``library``."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        owner = entry.get("owned_by") if isinstance(entry, dict) else None
        if isinstance(owner, str):
            found = next((k for k in KINDS if owner.lower() in k.owners), None)
            if found is not None:
                return found
    return None
