#!/usr/bin/env python3
"""The example agent of `promptloop init`: triages a support message into a category and an
urgency with one call to the model. Python standard library only.

It speaks promptloop's trial contract "promptloop.trial/1" (docs/agents.md):

    python3 example_agent/agent.py            one request (JSON) on stdin, one result on stdout
    python3 example_agent/agent.py --worker   JSON lines: one request per line, one result per line

It always prints a result document: a reply that is not JSON is the agent's failure
(error.cause "agent"), a model endpoint that fails is not (error.cause "infrastructure").
Logs go to stderr; the per-run key in request.model.api_key is never printed.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CONTRACT = "promptloop.trial/1"
MAX_TOKENS = 200
RESULT_FILE = "triage.json"
# A small schema keeps small models fast and their output parseable: the model server
# constrains the reply to it (response_format json_schema).
SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "technical", "account", "other"]},
        "urgency": {"type": "string", "enum": ["low", "normal", "high"]},
    },
    "required": ["category", "urgency"],
    "additionalProperties": False,
}


class TrialError(Exception):
    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause  # "agent" or "infrastructure"


def call_model(request: dict[str, Any], messages: list[dict[str, str]]) -> dict[str, Any]:
    """One chat-completions call; returns the response JSON or raises TrialError."""
    model = request.get("model") or {}
    base_url = str(model.get("base_url") or "").rstrip("/")
    if not base_url:
        raise TrialError("infrastructure", "the request names no model.base_url")
    timeout = float(request.get("timeout_s") or 120)
    body: dict[str, Any] = {
        "model": model.get("model"),
        "messages": messages,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "triage", "strict": True, "schema": SCHEMA},
        },
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    seed = (request.get("trial") or {}).get("seed")
    if isinstance(seed, int):
        body["seed"] = seed
    http_request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json",
                 "Authorization": f"Bearer {model.get('api_key') or ''}"},
        method="POST",
    )
    # Answer a little before promptloop's own limit, so a slow model is reported, not killed.
    limit = max(0.5, timeout - min(5.0, timeout / 10))
    try:
        with urllib.request.urlopen(http_request, timeout=limit) as response:
            raw = response.read()
    except urllib.error.HTTPError as err:
        detail = err.read()[:300].decode("utf-8", "replace")
        raise TrialError("infrastructure",
                         f"the model endpoint answered HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, TimeoutError):
            reason = f"timed out, no answer within {limit:.1f} s"
        raise TrialError("infrastructure", f"the model endpoint failed: {reason}") from None
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise TrialError("infrastructure",
                         "the model endpoint's answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise TrialError("infrastructure", "the model endpoint's answer has no text content")
    usage = data.get("usage") or {}
    return {"content": content, "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                                          "output_tokens": usage.get("completion_tokens", 0)}}


def parse_reply(content: str) -> dict[str, Any]:
    """The model's JSON reply as the trial's outcome (a reply wrapped in text is accepted)."""
    start, end = content.find("{"), content.rfind("}")
    for text in (content, content[start:end + 1] if 0 <= start < end else ""):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if isinstance(data, dict):
            return {"category": data.get("category"), "urgency": data.get("urgency")}
    raise TrialError("agent", f"the model's reply is not a JSON object: {content[:200]!r}")


def run_trial(request: dict[str, Any]) -> dict[str, Any]:
    prompt = (request.get("prompt") or {}).get("text")
    if not isinstance(prompt, str):  # never fall back to the file: that would evaluate the
        # committed prompt instead of the candidate promptloop sent
        return {"contract": CONTRACT, "outcome": {}, "error": {
            "cause": "infrastructure", "message": "the request has no prompt.text"}}
    message = ((request.get("task") or {}).get("input") or {}).get("content", "")
    messages = [{"role": "system", "content": prompt},
                {"role": "user", "content": f"Support message:\n{message}"}]
    result: dict[str, Any] = {"contract": CONTRACT, "outcome": {}, "transcript": list(messages),
                              "usage": None, "error": None}
    try:
        reply = call_model(request, messages)
        result["usage"] = reply["usage"]
        result["transcript"].append({"role": "assistant", "content": reply["content"]})
        result["outcome"] = parse_reply(reply["content"])
        workspace = request.get("workspace")
        if workspace:  # files the agent makes go into its workspace, nowhere else
            Path(workspace, RESULT_FILE).write_text(json.dumps(result["outcome"]) + "\n")
    except TrialError as err:
        result["error"] = {"cause": err.cause, "message": str(err)}
    except OSError as err:
        result["error"] = {"cause": "infrastructure", "message": f"workspace: {err}"}
    return result


def handle(text: str) -> str:
    """One request (text) -> one result line, with the key redacted."""
    try:
        request = json.loads(text)
        if not isinstance(request, dict):
            raise ValueError("not an object")
    except ValueError as err:
        return json.dumps({"contract": CONTRACT, "outcome": {}, "error": {
            "cause": "infrastructure", "message": f"the request is not a JSON object: {err}"}})
    started = time.monotonic()
    try:
        result = run_trial(request)
    except Exception as err:  # a bug here must still give a result document
        result = {"contract": CONTRACT, "outcome": {},
                  "error": {"cause": "agent", "message": f"agent bug: {err!r}"}}
    line = json.dumps(result)
    key = str((request.get("model") or {}).get("api_key") or "")
    if key:
        line = line.replace(json.dumps(key)[1:-1], "***").replace(key, "***")
    status = f"{result['error']['cause']} error" if result.get("error") else "ok"
    task_id = (request.get("task") or {}).get("id")
    print(f"[example] task {task_id}: {status} in {time.monotonic() - started:.1f} s",
          file=sys.stderr)
    return line


def main() -> None:
    if "--worker" in sys.argv[1:]:
        for text in sys.stdin:
            if text.strip():
                print(handle(text), flush=True)
    else:
        print(handle(sys.stdin.read()), flush=True)


if __name__ == "__main__":
    main()
