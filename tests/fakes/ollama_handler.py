"""The fake Ollama's request handler: one thread per connection, HTTP/1.1 keep-alive.

Routes and replies as Ollama does (``spec/ollama-api.md``); ``ollama_server.py`` has the
script format and the ``FakeOllama`` object whose state this handler reads and records.
"""

from __future__ import annotations

import json
import select
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, cast

from tests.fakes.ollama_script import (
    ScriptError,
    chunk_line,
    done_object,
    load_object,
    model_entry,
    normalize_model,
    ps_body,
    show_body,
    warmup_response,
)

if TYPE_CHECKING:
    from tests.fakes.ollama_server import FakeOllama

__all__ = ["FakeOllamaHandler"]

_POLL = 0.05
_FAILURE_KEYS = ("stall_after", "malformed_after", "error_line_after")
_STREAM_ENDS = ("complete", "no_done", "malformed", "error_line")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _ndjson(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


class FakeOllamaHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without this, Nagle plus delayed ACK adds ~40 ms to every fake request.
    disable_nagle_algorithm = True
    server_version = "fake-ollama/1"
    timeout = 300  # an idle keep-alive connection is dropped eventually even without stop()

    @property
    def fake(self) -> FakeOllama:
        return cast("FakeOllama", cast(Any, self.server).fake)

    def setup(self) -> None:
        super().setup()
        self.fake.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    # Routing.

    def do_HEAD(self) -> None:
        self._send(200 if self._path() == "/" else 404, b"", "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        path = self._path()
        fake = self.fake
        script = fake.script
        bodies: dict[str, Any] = {
            "/api/version": {"version": script["version"]},
            "/api/tags": {"models": [model_entry(m) for m in script["models"]]},
            "/api/ps": ps_body(list(fake.loaded), script["context_length"]),
            "/_fake/requests": list(fake.requests),
            "/_fake/outcomes": list(fake.outcomes),
        }
        if path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
        elif path in bodies:
            self._send_json(200, bodies[path])
        else:
            self._not_found()

    def do_POST(self) -> None:
        path = self._path()
        if path == "/api/chat":
            self._chat()
        elif path == "/api/show":
            self._show()
        elif path == "/_fake/script":
            self._set_script()
        else:
            self._read_body()
            self._not_found()

    # Endpoints.

    def _chat(self) -> None:
        body = self._json_body()
        if body is None:
            self.fake.record_outcome("bad_request")
            return
        self.fake.record_request(body)
        outcome = self._chat_outcome(body)
        self.fake.record_outcome(outcome)

    def _chat_outcome(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        messages = body.get("messages") or []
        if not isinstance(model, str) or not model:
            return self._error(400, "model is required", "bad_request")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return self._error(400, "messages must be a list of objects", "bad_request")
        if not self.fake.knows_model(model):
            return self._error(404, f"model '{model}' not found", "model_not_found")
        self.fake.mark_loaded(normalize_model(model))
        if not messages:
            self._send_json(200, load_object(model))
            return "load"
        # Like Ollama: a prompt longer than num_ctx is cut silently, never refused.
        prompt_tokens = self.fake.count_prompt(body, self.fake.ollama_window(body))
        options = body.get("options")
        if isinstance(options, dict) and options.get("num_predict") == 1:
            # A warm-up (fills the prompt cache): answered, but no script response is used.
            outcome = self._stream(model, warmup_response(), prompt_tokens)
            return "warmup" if outcome == "complete" else outcome
        response = self.fake.respond(body)
        if response["close_before_response"]:
            self.close_connection = True
            return "closed_before_response"
        if response["status"] != 200:
            return self._error(response["status"], response["error"], "http_error")
        if body.get("stream") is False:
            return self._reply_whole(model, response, prompt_tokens)
        return self._stream(model, response, prompt_tokens)

    def _reply_whole(self, model: str, response: dict[str, Any], prompt_tokens: int) -> str:
        if any(response[k] is not None for k in _FAILURE_KEYS) or response["no_done"]:
            return self._error(400, "fake: stream=false with a failure mode", "bad_request")
        chunks = response["chunks"]
        obj = done_object(model, response, prompt_tokens)
        obj["message"]["content"] = "".join(c.get("content", "") for c in chunks)
        if any("thinking" in c for c in chunks):
            obj["message"]["thinking"] = "".join(c.get("thinking", "") for c in chunks)
        lines = [json.loads(chunk_line(model, c)) for c in chunks if c.get("tool_calls")]
        calls = [call for line in lines for call in line["message"]["tool_calls"]]
        if calls:
            obj["message"]["tool_calls"] = calls
        self._send_json(200, obj)
        return "complete"

    def _stream(self, model: str, response: dict[str, Any], prompt_tokens: int) -> str:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            outcome = self._stream_body(model, response, prompt_tokens)
        except OSError:
            outcome = "client_disconnected"
        if outcome not in _STREAM_ENDS:
            self.close_connection = True
        return outcome

    def _stream_body(self, model: str, response: dict[str, Any], prompt_tokens: int) -> str:
        chunks = response["chunks"]
        for i in range(len(chunks) + 1):
            if response["stall_after"] == i:
                return self._wait(None)
            if response["malformed_after"] == i:
                return self._last_line(b"this is not json {\n", "malformed")
            if response["error_line_after"] == i:
                return self._last_line(_ndjson({"error": response["error"]}), "error_line")
            if i == len(chunks):
                break
            if response["delay"] and (waited := self._wait(response["delay"])) != "ok":
                return waited
            self._write_chunk(chunk_line(model, chunks[i]))
        if response["no_done"]:
            return self._last_line(b"", "no_done")
        return self._last_line(_ndjson(done_object(model, response, prompt_tokens)), "complete")

    def _show(self) -> None:
        body = self._json_body()
        if body is None:
            return
        name = body.get("model") or body.get("name")
        if not isinstance(name, str) or not self.fake.knows_model(name):
            self._send_json(404, {"error": f"model '{name}' not found"})
        else:
            self._send_json(200, show_body(self.fake.script))

    def _set_script(self) -> None:
        body = self._json_body()
        if body is None:
            return
        try:
            self.fake.set_script(body)
        except ScriptError as exc:
            self._send_json(400, {"error": str(exc)})
        else:
            self._send_json(200, {"status": "ok"})

    # Plumbing.

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _wait(self, seconds: float | None) -> str:
        """Sleep, but notice a client that hangs up and a fake that stops: an outcome."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.fake.stopping.is_set():
            step = _POLL if deadline is None else min(_POLL, deadline - time.monotonic())
            if step <= 0:
                return "ok"
            readable, _, _ = select.select([self.connection], [], [], step)
            if readable and self._peer_closed():
                # stop() shuts the sockets down too: that is not the client leaving.
                return "stopped" if self.fake.stopping.is_set() else "client_disconnected"
            if readable:
                time.sleep(step)  # unexpected bytes from the client: keep waiting
        return "stopped"

    def _peer_closed(self) -> bool:
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(_chunk(data))

    def _last_line(self, data: bytes, outcome: str) -> str:
        # One write: a client that hangs up once it has the last line (an error line, say)
        # cannot make the end of the stream fail and the outcome read client_disconnected.
        self.wfile.write((_chunk(data) if data else b"") + b"0\r\n\r\n")
        return outcome

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return b""
        parts = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def _json_body(self) -> dict[str, Any] | None:
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self._send_json(400, {"error": f"invalid request body: {exc}"})
            return None
        if not isinstance(body, dict):
            self._send_json(400, {"error": "request body must be a JSON object"})
            return None
        return body

    def _error(self, status: int, message: str, outcome: str) -> str:
        self._send_json(status, {"error": message})
        return outcome

    def _not_found(self) -> None:
        self._send(404, b"404 page not found", "text/plain")

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
