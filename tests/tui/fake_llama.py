"""A loopback chat endpoint that streams like llama.cpp's server on a slow CPU (tests only).

It answers ``POST …/chat/completions`` with server-sent events: first llama.cpp's ``prompt_progress``
(0 of :data:`PROMPT_TOKENS` evaluated), then, once the test sets :attr:`FakeLlama.evaluated`, the
next step (512 evaluated), then, once it sets :attr:`FakeLlama.generate`, a reply piece every 50 ms
until the client goes away. So a test decides when each phase of a long model call ends, and sees
what the screen says meanwhile. ``GET …/models`` answers at once.

Given ``replies``, it answers those instead, one per request, whole: a streamed request gets its reply
in pieces and the stream's end, a plain one (a structured call's repair round is not streamed) a chat
completion, but only once the test sets :attr:`FakeLlama.release` (so the test sees what the screen
says while that request waits).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Sequence
from typing import Any

#: The prompt size the progress reports (the issue's slot-fill was about this long).
PROMPT_TOKENS = 1710
#: How long the endpoint waits for the test before it gives up on a phase (seconds).
PHASE_TIMEOUT_S = 30.0


def _event(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _chunk(content: str | None, progress: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {"object": "chat.completion.chunk", "model": "fake",
                            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    if progress is not None:
        body["prompt_progress"] = progress
    return _event(body)


class FakeLlama:
    """The endpoint; ``url`` ends in /v1. ``requests`` holds each chat request's body."""

    def __init__(self, replies: Sequence[str] = ()) -> None:
        self.replies = list(replies)
        self.release = threading.Event()
        self.evaluated = threading.Event()
        self.generate = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.disconnected = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                payload = b'{"object": "list", "data": [{"id": "fake"}]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802
                outer.requests.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                if outer.replies:
                    self._reply(outer.replies.pop(0), bool(outer.requests[-1].get("stream")))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the body ends when the connection closes
                try:
                    self._stream()
                except (BrokenPipeError, ConnectionResetError):
                    outer.disconnected.set()

            def _stream(self) -> None:
                progress = {"total": PROMPT_TOKENS, "cache": 0, "processed": 0, "time_ms": 0}
                self._send(_chunk(None, progress))
                if not outer.evaluated.wait(PHASE_TIMEOUT_S):
                    return
                self._send(_chunk(None, {**progress, "processed": 512, "time_ms": 15000}))
                if not outer.generate.wait(PHASE_TIMEOUT_S):
                    return
                deadline = time.monotonic() + PHASE_TIMEOUT_S
                while time.monotonic() < deadline:  # until the client leaves (a cancelled re-run)
                    self._send(_chunk('{"reason": '))
                    time.sleep(0.05)

            def _reply(self, text: str, stream: bool) -> None:
                if stream:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for start in range(0, len(text), 4):
                        self._send(_chunk(text[start:start + 4]))
                    self._send(_event({"object": "chat.completion.chunk", "model": "fake", "choices": [
                        {"index": 0, "delta": {}, "finish_reason": "stop"}]}) + b"data: [DONE]\n\n")
                    return
                outer.release.wait(PHASE_TIMEOUT_S)
                payload = json.dumps({"object": "chat.completion", "model": "fake", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 9}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _send(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.evaluated.set()
        self.generate.set()
        self.httpd.shutdown()
        self.httpd.server_close()
