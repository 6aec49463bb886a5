"""A real HTTP/1.1 server on 127.0.0.1 that speaks Ollama's API and replays a script.

Thread-based (stdlib ``ThreadingHTTPServer``), so sync tests, trio tests and other processes
can all use it::

    with FakeOllama(script) as fake:      # listens on a random port
        client = OllamaClient(fake.url)
        ...
        fake.requests                     # every POST /api/chat body received, in order
        fake.wait_for_outcomes(1)         # how each chat request ended (see below)
                                          # (recorded after the reply's last byte, so a
                                          # client may have it all first: wait, never
                                          # read fake.outcomes while the fake runs)
        fake.connection_count             # TCP connections accepted so far

    python -m tests.fakes.ollama_server --script FILE.json [--port N]
        prints ``READY http://127.0.0.1:PORT`` once listening; runs until SIGTERM/SIGINT.

Script (a JSON object; every key optional, defaults shown)::

    {"models": ["qwen3-coder:latest"],   # /api/tags; a chat naming another model gets
                                         # 404 {"error": "model 'x' not found"}
     "responses": [                      # each POST /api/chat consumes the next one
        {"chunks": [{"thinking": "hmm"}, {"content": "Hel"}, {"content": "lo"},
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}],
         "delay": 0.0,                   # seconds to sleep before each chunk
         "status": 200,                  # non-200: reply this status with {"error": error}
         "error": "fake error",          #   and no stream; also the text of an error line
         "stall_after": null,            # n: send n chunks, then hang until the client
                                         #   disconnects (or the fake stops)
         "malformed_after": null,        # n: after n chunks send a non-JSON line, end
         "error_line_after": null,       # n: after n chunks send {"error": error}, end
         "no_done": false,               # end the stream without the done chunk
         "done_reason": "stop",
         "close_before_response": false, # read the request, close without answering
         "prompt_eval_count": null,      # counters of the done chunk (null: computed)
         "eval_count": null}],
     "repeat_last": true,                # responses used up: repeat the last one
                                         # (false: reply "(script exhausted)" then done)
     "context_length": 262144,           # /api/show model_info and /api/ps
     "capabilities": ["completion", "tools", "thinking"],   # /api/show
     "version": "0.12.6"}                # /api/version

A chunk may hold ``content``, ``thinking`` and ``tool_calls`` together; a tool call is
``{"name", "arguments", "id"?}`` where ``arguments`` may be a string to play a model that
sends JSON text. Names without a tag mean ``:latest``. An unknown key is an error.

Like Ollama, a chat with no messages is a model load: one ``done_reason: "load"`` object,
no script response consumed (it is still recorded in ``requests``). A chat with
``options.num_predict`` 1 is a warm-up (zcoder's prompt-cache fill): one token ``Hello``
and ``done_reason: "length"``, no script response consumed, outcome ``warmup``. ``"stream": false``
gets one aggregated object (only for responses without a failure mode).

Outcomes (``fake.outcomes``, ``GET /_fake/outcomes``), one per chat request: ``complete``,
``no_done``, ``malformed``, ``error_line``, ``http_error``, ``closed_before_response``,
``client_disconnected``, ``stopped``, ``load``, ``warmup``, ``bad_request``,
``model_not_found``.

A context window (keyword options, off by default): with ``tokenizer`` (a
``tests.fakes.window.Tokenizer``) a chat's prompt is counted with the fake's own tokenizer
and, as Ollama does, silently cut to its last ``options.num_ctx`` tokens (2048 when the
request sets none): ``prompt_eval_count`` is the count kept. ``fake.counted`` has each
counted request's full count and ``fake.truncated`` whether it was cut, in order (a load
request is not counted). Without it a prompt is the characters of its contents over four.

``responder`` (a callable taking the request body and returning one script response)
chooses the reply of every chat that would take the next script response, instead of
the script's order: a test whose model replies depend on what is asked (a summary
request, a tool result) plays that model with it. A warm-up is still answered without it.

Control endpoints: ``GET /_fake/requests`` (the chat bodies as a JSON list) and
``POST /_fake/script`` (replace the script and restart at its first response; a bad script
gets 400 and changes nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

from tests.fakes.ollama_handler import FakeOllamaHandler
from tests.fakes.ollama_script import ScriptError, normalize_model, validate_script
from tests.fakes.window import OLLAMA_NUM_CTX, Tokenizer

__all__ = ["FakeOllama", "Responder", "ScriptError", "main"]

Responder = Callable[[dict[str, Any]], Mapping[str, Any]]

_EXHAUSTED = validate_script({"responses": [{"chunks": [{"content": "(script exhausted)"}]}]})


def _plain(script: Any) -> Any:
    # Any mapping is accepted as a script; anything else is left for validate_script to refuse.
    return dict(script) if isinstance(script, Mapping) else script


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so stop() leaves no thread behind.
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, fake: FakeOllama, port: int) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", port), fake.handler_class)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is the normal case under test, not a failure.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FakeOllama:
    """A scripted Ollama on 127.0.0.1; ``start()``/``stop()`` or a ``with`` block."""

    # The fake OpenAI-compatible server (tests/fakes/openai_server.py) swaps the protocol.
    handler_class: type[BaseHTTPRequestHandler] = FakeOllamaHandler

    def __init__(
        self,
        script: Mapping[str, Any] | None = None,
        *,
        port: int = 0,
        tokenizer: Tokenizer | None = None,
        responder: Responder | None = None,
    ) -> None:
        self._script = validate_script({} if script is None else _plain(script))
        self._port = port
        self.tokenizer = tokenizer
        self.responder = responder
        self.counted: list[int] = []
        self.truncated: list[bool] = []
        self._next = 0
        self._lock = threading.Condition()
        self.stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.outcomes: list[str] = []
        self.loaded: list[str] = []
        self.connection_count = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (after ``start()``)."""
        if self._server is None:
            raise RuntimeError("FakeOllama is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def script(self) -> dict[str, Any]:
        """The validated script with defaults filled in."""
        with self._lock:
            return self._script

    def start(self) -> FakeOllama:
        """Bind and serve in a background thread; returns self."""
        self.stopping.clear()
        self._server = _Server(self, self._port)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-ollama",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release hanging responses, close every socket, join every thread."""
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            # SHUT_RDWR wakes a handler blocked reading the next request on a keep-alive socket.
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def set_script(self, script: Mapping[str, Any]) -> None:
        """Replace the script (validated first) and restart at its first response."""
        checked = validate_script(_plain(script))
        with self._lock:
            self._script = checked
            self._next = 0

    def wait_for_outcomes(self, count: int, timeout: float = 10.0) -> list[str]:
        """Block until ``count`` chat requests have ended; their outcomes (for assertions)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.outcomes) >= count, timeout):
                raise AssertionError(f"expected {count} outcomes, have {self.outcomes}")
            return list(self.outcomes)

    # Called by the handler threads.

    def record_request(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)

    def record_outcome(self, outcome: str) -> None:
        with self._lock:
            self.outcomes.append(outcome)
            self._lock.notify_all()

    def mark_loaded(self, model: str) -> None:
        with self._lock:
            if model not in self.loaded:
                self.loaded.append(model)

    def knows_model(self, name: str) -> bool:
        return normalize_model(name) in self.script["models"]

    def count_prompt(self, body: Mapping[str, Any], window: int | None = None) -> int:
        """A chat's prompt tokens as this fake counts them (recorded in ``counted``); with a
        ``window`` (Ollama's ``num_ctx``) the prompt is cut to it, as Ollama does, and
        ``truncated`` records whether it was."""
        messages = body.get("messages") or []
        if self.tokenizer is None:
            return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
        count = self.tokenizer.count(messages, body.get("tools"))
        with self._lock:
            self.counted.append(count)
            if window is not None:
                self.truncated.append(count > window)
        return count if window is None else min(count, window)

    def ollama_window(self, body: Mapping[str, Any]) -> int | None:
        """The ``num_ctx`` a native chat runs with (when the fake counts tokens at all)."""
        if self.tokenizer is None:
            return None
        options = body.get("options")
        num_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        return num_ctx if isinstance(num_ctx, int) and num_ctx > 0 else OLLAMA_NUM_CTX

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The response for a chat: the responder's, else the script's next."""
        if self.responder is None:
            return self.next_response()
        checked = validate_script({"responses": [_plain(self.responder(body))]})
        return dict(checked["responses"][0])

    def next_response(self) -> dict[str, Any]:
        with self._lock:
            responses = self._script["responses"]
            index = self._next
            self._next += 1
            if index < len(responses):
                return dict(responses[index])
            if self._script["repeat_last"] and responses:
                return dict(responses[-1])
            return dict(_EXHAUSTED["responses"][0])

    def track(self, conn: socket.socket, active: bool) -> None:
        with self._lock:
            if active:
                self._connections.add(conn)
                self.connection_count += 1
            else:
                self._connections.discard(conn)


def main(argv: list[str] | None = None) -> int:
    """CLI: serve a script file until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.ollama_server")
    parser.add_argument("--script", required=True, help="JSON script file")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        with open(args.script, encoding="utf-8") as f:
            fake = FakeOllama(json.load(f), port=args.port)
    except (OSError, ValueError) as exc:
        print(f"fake ollama: {args.script}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        fake.start()
    except OSError as exc:
        print(f"fake ollama: cannot listen on port {args.port}: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"READY {fake.url}", flush=True)
        while not stop.wait(0.2):
            pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
