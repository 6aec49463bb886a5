"""The fake OpenAI-compatible server's request handler (see ``openai_server.py``).

The HTTP plumbing (keep-alive, chunked bodies, waiting that notices a client leaving) is the
fake Ollama handler's; the routes and the SSE stream are the OpenAI API's, shaped as
llama.cpp's server sends them (``chat.completion.chunk`` objects, ``data: [DONE]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from tests.fakes.ollama_handler import FakeOllamaHandler
from tests.fakes.ollama_script import normalize_model, ps_body

if TYPE_CHECKING:
    from tests.fakes.openai_server import FakeOpenAI

__all__ = ["FakeOpenAIHandler", "chunk_events"]

_STREAM_ENDS = ("complete", "no_done", "malformed", "error_line")
_CREATED = 1_760_000_000


def _event(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": model,
        "system_fingerprint": "b6000-fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _thirds(text: str) -> list[str]:
    n = max(len(text) // 3, 1)
    return [text[:n], text[n : 2 * n], text[2 * n :]] if len(text) > 2 else [text]


def chunk_events(model: str, chunk: Mapping[str, Any], first_call: int) -> list[dict[str, Any]]:
    """The chunk objects one script chunk becomes (tool calls numbered from ``first_call``)."""
    out = []
    if chunk.get("thinking"):
        out.append(_chunk(model, {"reasoning_content": chunk["thinking"]}))
    if chunk.get("content"):
        out.append(_chunk(model, {"content": chunk["content"]}))
    for i, call in enumerate(chunk.get("tool_calls", []), start=first_call):
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        head = {
            "index": i,
            "id": call.get("id") or f"call_fake{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        out.append(_chunk(model, {"tool_calls": [head]}))
        for piece in _thirds(text):
            out.append(
                _chunk(model, {"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            )
    return out


class FakeOpenAIHandler(FakeOllamaHandler):
    server_version = "fake-openai/1"

    @property
    def fake(self) -> FakeOpenAI:
        return cast("FakeOpenAI", cast(Any, self.server).fake)

    def _note(self) -> None:
        self.fake.paths.append(f"{self.command} {self._path()}")
        self.fake.authorizations.append(self.headers.get("Authorization"))

    def do_GET(self) -> None:
        self._note()
        path = self._path()
        fake = self.fake
        script = fake.script
        n_ctx = fake.reported_window
        if path == "/v1/models":
            entries = [
                {"id": m, "object": "model", "created": _CREATED, "owned_by": fake.owned_by}
                for m in script["models"]
            ]
            if fake.owned_by == "llamacpp" and fake.model_meta and n_ctx is not None:
                for entry in entries:
                    entry["meta"] = {"n_ctx": n_ctx, "n_ctx_train": 8192}
            if fake.owned_by == "vllm" and n_ctx is not None:
                for entry in entries:
                    entry["max_model_len"] = n_ctx
            self._send_json(200, {"object": "list", "data": entries})
        elif path == "/props" and fake.owned_by == "llamacpp" and n_ctx is not None:
            self._send_json(200, {"default_generation_settings": {"n_ctx": n_ctx}, "n_ctx": n_ctx})
        elif fake.flavour == "LM Studio" and path.startswith("/api/v0/models"):
            self._lm_studio_models(path.removeprefix("/api/v0/models").removeprefix("/"))
        elif fake.flavour == "Ollama" and path == "/api/ps":
            self._send_json(200, ps_body(list(fake.loaded), n_ctx or script["context_length"]))
        elif path == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._not_found()

    def _lm_studio_models(self, name: str) -> None:
        """LM Studio's own ``/api/v0/models`` (a list) and ``/api/v0/models/NAME``."""
        fake = self.fake
        models = fake.script["models"]
        entries = [
            {
                "id": m,
                "object": "model",
                "type": "llm",
                "publisher": "fake",
                "arch": "qwen3",
                "compatibility_type": "gguf",
                "quantization": "Q4_K_M",
                "state": "loaded",
                "max_context_length": fake.script["context_length"],
            }
            for m in models
        ]
        if fake.reported_window is not None:
            for entry in entries:
                entry["loaded_context_length"] = fake.reported_window
        if not name:
            self._send_json(200, {"object": "list", "data": entries})
            return
        found = [e for e in entries if e["id"] == name or e["id"] == normalize_model(name)]
        if found:
            self._send_json(200, found[0])
        else:
            self._send_json(404, {"error": f"Model {name} not found"})

    def do_POST(self) -> None:
        self._note()
        if self._path() == "/v1/chat/completions":
            self._chat()
        else:
            self._read_body()
            self._not_found()

    def _not_found(self) -> None:
        # llama.cpp's answer to a path it does not serve (an Ollama client asking /api/chat).
        self._send(404, self.fake.error_body(404, "File Not Found"), "application/json")

    def _error(self, status: int, message: str, outcome: str) -> str:
        self._send(status, self.fake.error_body(status, message), "application/json")
        return outcome

    def _chat_outcome(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not isinstance(messages, list) or not messages:
            return self._error(400, "'messages' must be a non-empty list", "bad_request")
        if self.fake.check_model and not self.fake.knows_model(model):
            return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
        self.fake.mark_loaded(normalize_model(model))
        prompt, refusal = self.fake.overflow(body)
        if refusal:
            self._send(400, refusal, "application/json; charset=utf-8")
            return "context_exceeded"
        response = self.fake.respond(body)
        if response["close_before_response"]:
            self.close_connection = True
            return "closed_before_response"
        if response["status"] != 200:
            return self._error(response["status"], response["error"], "http_error")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            outcome = self._events(model, response, body, prompt)
        except OSError:
            outcome = "client_disconnected"
        if outcome not in _STREAM_ENDS:
            self.close_connection = True
        return outcome

    def _events(
        self, model: str, response: dict[str, Any], body: dict[str, Any], prompt_tokens: int
    ) -> str:
        chunks = response["chunks"]
        self._write_chunk(_event(_chunk(model, {"role": "assistant", "content": None})))
        calls = 0
        for i in range(len(chunks) + 1):
            if response["stall_after"] == i:
                return self._wait(None)
            if response["malformed_after"] == i:
                return self._last_line(b"data: this is not json {\n\n", "malformed")
            if response["error_line_after"] == i:
                return self._last_line(self._error_event(response["error"]), "error_line")
            if i == len(chunks):
                break
            if response["delay"] and (waited := self._wait(response["delay"])) != "ok":
                return waited
            for obj in chunk_events(model, chunks[i], calls):
                self._write_chunk(_event(obj))
            calls += len(chunks[i].get("tool_calls", []))
        if response["no_done"]:
            return self._last_line(b"", "no_done")
        finish = "tool_calls" if calls else response["done_reason"]
        self._write_chunk(_event(_chunk(model, {}, finish)))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._write_chunk(_event(self._usage(model, response, prompt_tokens)))
        return self._last_line(b"data: [DONE]\n\n", "complete")

    def _usage(self, model: str, response: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
        prompt = response["prompt_eval_count"]
        if prompt is None:
            prompt = prompt_tokens
        completion = response["eval_count"]
        if completion is None:
            completion = len(response["chunks"])
        obj = _chunk(model, {})
        obj["choices"] = []
        obj["usage"] = {
            "completion_tokens": completion,
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
        }
        obj["timings"] = {"prompt_ms": 2.0, "predicted_ms": 20.0 * completion}
        return obj

    def _error_event(self, message: str) -> bytes:
        error = {"code": 500, "message": message, "type": "server_error"}
        if self.fake.error_as_data:
            return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
        return b"error: " + json.dumps(error).encode() + b"\n\n"
