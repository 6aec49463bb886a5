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

``owned_by`` also says which server the fake plays (``tests.fakes.window.FLAVOURS``):
``"llamacpp"``, ``"vllm"``, ``"organization_owner"`` (LM Studio, which also answers its own
``/api/v0/models`` and ``/api/v0/models/NAME`` with ``loaded_context_length``) or
``"library"`` (Ollama's ``/v1``, which also answers ``/api/ps`` with the models chatted with
so far, as Ollama lists the loaded ones).

A context window (off by default): ``window=W`` makes the fake count each chat's prompt
with its ``tokenizer`` (``tests.fakes.window.Tokenizer()`` unless given; the counts are in
``fake.counted``), report that count as ``usage.prompt_tokens``, and refuse a prompt its
server would not take with that server's exact HTTP 400 body (``window.overflow_body``;
outcome ``context_exceeded``). The window is also what the fake reports as its context
(``meta.n_ctx``, ``/props``, ``max_model_len``, ``loaded_context_length``, ``/api/ps``),
unless ``report_window`` is false: then it reports none. Without ``window`` the script's
``context_length`` is reported. ``responder`` is the fake Ollama's.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from tests.fakes.ollama_server import FakeOllama, Responder
from tests.fakes.openai_handler import FakeOpenAIHandler
from tests.fakes.window import FLAVOURS, Flavour, Tokenizer, overflow_body

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
        window: int | None = None,
        report_window: bool = True,
        tokenizer: Tokenizer | None = None,
        responder: Responder | None = None,
    ) -> None:
        if window is not None and tokenizer is None:
            tokenizer = Tokenizer()
        super().__init__(script, port=port, tokenizer=tokenizer, responder=responder)
        self.window = window
        self.report_window = report_window
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

    @property
    def flavour(self) -> Flavour:
        """The server this fake plays, from ``owned_by`` (llama.cpp for an unknown owner)."""
        return FLAVOURS.get(self.owned_by, "llama.cpp")

    @property
    def reported_window(self) -> int | None:
        """The context the fake says it runs with (None: it says nothing)."""
        if not self.report_window:
            return None
        return self.window if self.window is not None else int(self.script["context_length"])

    def overflow(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """The prompt's count, and the HTTP 400 body refusing the chat as too large for
        the window (``b""``: it fits, or the fake enforces no window)."""
        prompt = self.count_prompt(body)
        if self.window is None:
            return prompt, b""
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        cap = max_tokens if isinstance(max_tokens, int) else None
        return prompt, overflow_body(self.flavour, prompt, cap, self.window)

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
