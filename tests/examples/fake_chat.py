"""A loopback OpenAI-compatible chat-completions server for the example agents' tests.

The request's `model` picks the answer, so one server serves every case at once:
`reply:<name>` answers with the canned content `<name>` of `FakeChat(replies=...)`,
`status:<code>` answers that HTTP status with a body that echoes the Authorization header (an
agent must not repeat it), `slow:<seconds>` answers after that delay, and `garbage` answers
200 with a body that is not JSON. Every request is recorded (headers and JSON body).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


class FakeChat:
    """`with FakeChat({"ok": '{"items": []}'}) as fake:`; `fake.base_url` ends in /v1."""

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeChat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, seen: Seen) -> tuple[int, bytes]:
        with self._lock:
            self.seen.append(seen)
        if seen.path != "/v1/chat/completions":
            return 404, b'{"error": {"message": "no such route"}}'
        model = str(seen.body.get("model", ""))
        kind, _, arg = model.partition(":")
        if kind == "reply" and arg in self.replies:
            return 200, json.dumps(completion(self.replies[arg])).encode()
        if kind == "status":
            echo = seen.headers.get("authorization", "")
            return int(arg), json.dumps({"error": {"message": f"rejected {echo}"}}).encode()
        if kind == "slow":
            time.sleep(float(arg))
            return 200, json.dumps(completion("{}")).encode()
        if kind == "garbage":
            return 200, b"<html>proxy error</html>"
        return 400, json.dumps({"error": {"message": f"unknown fake model {model!r}"}}).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsable": raw.decode(errors="replace")}
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, data = fake._answer(Seen(self.path, headers, body))
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
