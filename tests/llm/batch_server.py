"""A loopback server speaking enough of the Anthropic Message Batches API and of the OpenAI
Files + Batch APIs for the real SDK clients, plus the direct calls a preflight makes.

A batch stays in progress for `polls_before_end` retrieves, then ends. Each request's reply
comes from `answer(prompt)`: a reply text, or None for an errored request. With `agent`,
OpenAI requests that carry tools (agent turns, batched or direct) are answered by
`agent(body)` instead.
"""

from __future__ import annotations

import email
import email.policy
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.llm.fake_api import anthropic_message, openai_completion

Answer = Callable[[str], str | None]
Agent = Callable[[dict[str, Any]], dict[str, Any] | None]
"""An OpenAI Chat Completions body with tools -> the completion body, or None (errored)."""
_TIME = "2026-01-01T00:00:00Z"


def _text(content: Any) -> str:
    if isinstance(content, list):  # Anthropic content blocks
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _prompt(params: dict[str, Any]) -> str:
    return "\n".join(_text(m.get("content")) for m in params.get("messages", []))


class BatchServer:
    """`with BatchServer(answer) as server:`; `server.url` is `http://127.0.0.1:<port>`."""

    def __init__(self, answer: Answer, polls_before_end: int = 2,
                 agent: Agent | None = None) -> None:
        self.answer = answer
        self.agent = agent
        self.agent_direct = 0
        """Direct (not batched) agent calls answered by `agent`."""
        self.polls_before_end = polls_before_end
        self.answered: dict[str, Any] = {}
        """Batch id -> its results once ended (Anthropic's JSONL, OpenAI's file ids): fixed."""
        self.openai_status: str | None = None
        """When set, every OpenAI batch ends in this status (`failed`, `expired`)."""
        self.creates: list[dict[str, Any]] = []
        """Every batch create call (Anthropic body, or OpenAI body + the uploaded lines)."""
        self.polls: dict[str, int] = {}
        self.direct = 0
        self.files: dict[str, str] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> BatchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- Anthropic --------------------------------------------------------------------------
    def _anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        ended = self.polls.get(batch_id, 0) > self.polls_before_end
        n = len(self.batches[batch_id]["requests"])
        return {
            "id": batch_id, "type": "message_batch", "created_at": _TIME, "expires_at": _TIME,
            "processing_status": "ended" if ended else "in_progress",
            "ended_at": _TIME if ended else None,
            "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0,
                               "errored": 0, "canceled": 0, "expired": 0},
            "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def _anthropic_results(self, batch_id: str) -> str:
        if batch_id in self.answered:  # a provider's results do not change once ended
            return str(self.answered[batch_id])
        lines = []
        for item in self.batches[batch_id]["requests"]:
            text = self.answer(_prompt(item["params"]))
            if text is None:
                result: dict[str, Any] = {"type": "errored", "error": {
                    "type": "error", "error": {"type": "api_error", "message": "judge fell over"}}}
            else:
                result = {"type": "succeeded",
                          "message": anthropic_message({"type": "text", "text": text})}
            lines.append(json.dumps({"custom_id": item["custom_id"], "result": result}))
        self.answered[batch_id] = "\n".join(lines) + "\n"
        return str(self.answered[batch_id])

    # --- OpenAI -----------------------------------------------------------------------------
    def _openai_batch(self, batch_id: str) -> dict[str, Any]:
        ended = self.polls.get(batch_id, 0) > self.polls_before_end
        batch = self.batches[batch_id]
        body: dict[str, Any] = {
            "id": batch_id, "object": "batch", "endpoint": batch["endpoint"],
            "input_file_id": batch["input_file_id"], "completion_window": "24h",
            "created_at": 0, "status": "completed" if ended else "in_progress",
        }
        if ended and self.openai_status is not None:
            return body | {"status": self.openai_status}
        if ended and batch_id in self.answered:  # its output files are written once
            return body | dict(self.answered[batch_id])
        if ended:
            out, err = [], []
            for line in batch["lines"]:
                if self.agent is not None and line["body"].get("tools"):
                    reply = self.agent(line["body"])
                    if reply is None:
                        err.append({"id": "r", "custom_id": line["custom_id"], "error": None,
                                    "response": {"status_code": 500, "request_id": "q", "body": {
                                        "error": {"message": "agent fell over"}}}})
                    else:
                        out.append({"id": "r", "custom_id": line["custom_id"], "error": None,
                                    "response": {"status_code": 200, "request_id": "q",
                                                 "body": reply}})
                    continue
                text = self.answer(_prompt(line["body"]))
                if text is None:
                    err.append({"id": "r", "custom_id": line["custom_id"], "error": None,
                                "response": {"status_code": 500, "request_id": "q", "body": {
                                    "error": {"message": "judge fell over"}}}})
                else:
                    out.append({"id": "r", "custom_id": line["custom_id"], "error": None,
                                "response": {"status_code": 200, "request_id": "q",
                                             "body": openai_completion(text)}})
            for key, rows in (("output_file_id", out), ("error_file_id", err)):
                if rows:
                    file_id = f"file-{key}-{batch_id}"
                    self.files[file_id] = "\n".join(json.dumps(r) for r in rows) + "\n"
                    body[key] = file_id
            self.answered[batch_id] = {k: body[k] for k in ("output_file_id", "error_file_id")
                                       if k in body}
        return body

    def _upload(self, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        message = email.message_from_bytes(
            f"content-type: {headers['content-type']}\r\n\r\n".encode() + raw,
            policy=email.policy.default,
        )
        content = ""
        for part in message.iter_parts():
            if part.get_filename():
                content = part.get_payload(decode=True).decode("utf-8")  # type: ignore[union-attr]
        file_id = f"file-in-{len(self.files)}"
        self.files[file_id] = content
        return {"id": file_id, "object": "file", "bytes": len(content), "created_at": 0,
                "filename": "judge-batch.jsonl", "purpose": "batch", "status": "processed"}

    # --- routing ----------------------------------------------------------------------------
    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes
              ) -> tuple[int, str]:
        with self._lock:
            return self._route(method, path.split("?")[0], headers, raw)

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes
               ) -> tuple[int, str]:
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/v1/messages":
            self.direct += 1
            return 200, json.dumps(anthropic_message({"type": "text", "text": "ok"}))
        if method == "POST" and path == "/v1/chat/completions":
            body = json.loads(raw)
            if self.agent is not None and body.get("tools"):
                self.agent_direct += 1
                reply = self.agent(body)
                if reply is None:
                    return 500, json.dumps({"error": {"message": "agent fell over"}})
                return 200, json.dumps(reply)
            self.direct += 1
            return 200, json.dumps(openai_completion("ok"))
        if method == "POST" and path == "/v1/messages/batches":
            body = json.loads(raw)
            batch_id = f"msgbatch_{len(self.batches)}"
            self.batches[batch_id] = body
            self.creates.append(body)
            return 200, json.dumps(self._anthropic_batch(batch_id))
        if parts[:3] == ["v1", "messages", "batches"] and len(parts) == 5:
            return 200, self._anthropic_results(parts[3])
        if parts[:3] == ["v1", "messages", "batches"] and len(parts) == 4:
            self.polls[parts[3]] = self.polls.get(parts[3], 0) + 1
            return 200, json.dumps(self._anthropic_batch(parts[3]))
        if method == "POST" and path == "/v1/files":
            return 200, json.dumps(self._upload(headers, raw))
        if method == "POST" and path == "/v1/batches":
            body = json.loads(raw)
            lines = [json.loads(x) for x in self.files[body["input_file_id"]].splitlines() if x]
            batch_id = f"batch_{len(self.batches)}"
            self.batches[batch_id] = body | {"lines": lines}
            self.creates.append(body | {"lines": lines})
            return 200, json.dumps(self._openai_batch(batch_id))
        if parts[:2] == ["v1", "batches"] and len(parts) == 3:
            self.polls[parts[2]] = self.polls.get(parts[2], 0) + 1
            return 200, json.dumps(self._openai_batch(parts[2]))
        if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            return 200, self.files[parts[2]]
        return 404, json.dumps({"error": {"message": f"no route {method} {path}"}})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, payload = server.route(self.command, self.path, headers, raw)
                data = payload.encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        return Handler
