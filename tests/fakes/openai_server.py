"""A real HTTP/1.1 server on 127.0.0.1 that speaks the OpenAI-compatible chat API (as
llama.cpp's ``llama-server`` and vLLM serve it) and replays the fake Ollama's script::

    with FakeOpenAI(script) as fake:           # listens on a random port
        client = OpenAIClient(fake.url + "/v1")
        fake.requests                          # every chat body received, in order
        fake.authorizations                    # the Authorization header of each request
        fake.wait_for_outcomes(1)              # as the fake Ollama's outcomes

The script is the fake Ollama's (``tests/fakes/ollama_server.py``): each chunk becomes one
``chat.completion.chunk`` SSE event (``thinking`` as ``reasoning_content``), a chunk's tool
calls become the pieces a server streams (id and name first, then the arguments text cut
in three), then comes a ``finish_reason`` event, the usage event (when the request asked
with ``stream_options.include_usage``) and ``data: [DONE]``. The failure modes are the
same: ``stall_after``, ``malformed_after`` (a ``data:`` line that is not JSON),
``error_line_after`` (llama.cpp's ``error:`` line, or ``data: {"error": ...}`` with
``error_as_data``), ``no_done`` (the body ends before any finish reason),
``close_before_response`` and ``status`` (an error body in ``error_shape``).

Keyword options: ``owned_by`` (``/v1/models``; ``"llamacpp"`` also gives the script's
``context_length`` as each model's ``meta.n_ctx``, unless ``model_meta`` is false, and as
``/props`` ``default_generation_settings.n_ctx``), ``check_model`` (a chat naming a model not
in the script gets vLLM's 404; llama.cpp ignores the name), ``error_shape``
(``"openai"``: ``{"error": {"message"}}``; ``"vllm"``: ``{"message"}``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from tests.fakes.ollama_server import FakeOllama
from tests.fakes.openai_handler import FakeOpenAIHandler

__all__ = ["FakeOpenAI"]

ErrorShape = Literal["openai", "vllm"]


class FakeOpenAI(FakeOllama):
    """A scripted OpenAI-compatible server; the fake Ollama's life cycle and records."""

    handler_class = FakeOpenAIHandler

    def __init__(
        self,
        script: Any = None,
        *,
        port: int = 0,
        owned_by: str = "llamacpp",
        check_model: bool = False,
        error_shape: ErrorShape = "openai",
        error_as_data: bool = False,
        model_meta: bool = True,
    ) -> None:
        super().__init__(script, port=port)
        self.owned_by = owned_by
        self.check_model = check_model
        self.error_shape = error_shape
        self.error_as_data = error_as_data
        self.model_meta = model_meta
        self.authorizations: list[str | None] = []
        self.paths: list[str] = []

    def start(self) -> FakeOpenAI:
        super().start()
        return self

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def error_body(self, status: int, message: str) -> bytes:
        """An error body as the configured server kind shapes it."""
        if self.error_shape == "vllm":
            obj: dict[str, Any] = {
                "object": "error",
                "message": message,
                "type": "BadRequestError",
                "param": None,
                "code": status,
            }
        else:
            obj = {"error": {"code": status, "message": message, "type": "server_error"}}
        return json.dumps(obj).encode()
