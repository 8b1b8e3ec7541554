"""The model gateway: an OpenAI-compatible chat-completions endpoint on loopback, in front of
promptloop's own model clients.

An agent written in any language talks to `base_url_for(token)` with `api_key=token`, exactly
as it would talk to OpenAI; the gateway turns each request into one
`ModelClient.complete(messages, tools=..., settings=ModelSettings(...))` call of the client
registered for that token and the reply back into OpenAI's response JSON. The real provider keys
stay in promptloop's process: the agent only ever sees a per-trial token, which dies with
`unregister`.

Served (the subset agents use):
- `POST /t/<token>/v1/chat/completions`: model, messages (system / developer / user /
  assistant with tool_calls / tool), tools (function tools), tool_choice ("auto", "required",
  "none" or one named function), response_format (`json_schema` passed through, `json_object`
  as a schema of any object), temperature, max_tokens (or max_completion_tokens), seed, n = 1,
  stream (the whole reply as one server-sent-events body);
- `GET /t/<token>/v1/models` (and `/v1/models/<id>`).
The token may also come as `Authorization: Bearer <token>` on `/v1/...` paths.

Errors are OpenAI-shaped JSON (`{"error": {"message", "type", "param", "code"}}`), with
`x-should-retry: false` so the agent's SDK does not retry what promptloop already retried:
an unknown token is 401, a malformed body 400 naming the field, a `ModelError` of the client 502
with its (redacted) message, any other exception of the client 500. Both of the latter are kept
per token (`errors(token)`): the trial is then counted errored (infrastructure), not failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.llm.errors import ModelError
from agents.llm.types import (
    Message,
    ModelClient,
    ModelResponse,
    ModelSettings,
    ToolCall,
    ToolSpec,
    Usage,
)
from agents.transcript import Transcript
from optimizer.core.redact import redact

HOST = "127.0.0.1"
MAX_BODY_BYTES = 32 * 1024 * 1024
"""A request body larger than this is refused (413) without being read."""
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 300.0
"""A connection that sends no complete request for this long is closed."""
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
JSON_OBJECT_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "json_object", "schema": {"type": "object"}, "strict": False},
}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "error": "stop",
    "other": "stop",
}
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 413: "Payload Too Large", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 502: "Bad Gateway",
}


class RequestError(ValueError):
    """A malformed chat request: answered 400, the message names the field."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class ChatCall:
    """One chat-completions request, translated to a ModelClient call."""

    messages: list[Message]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings
    model: str | None = None
    stream: bool = False
    include_usage: bool = False


@dataclass
class _Route:
    client: ModelClient
    transcript: Transcript | None
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)
    revoked: bool = False


@dataclass(frozen=True)
class _HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, payload: Any) -> _Reply:
        return cls(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"))


class _HttpError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.reply = error_reply(status, message, kind, param, code)


def error_reply(status: int, message: str, kind: str, param: str | None = None,
                code: str | None = None) -> _Reply:
    return _Reply.json(status, {"error": {"message": message, "type": kind, "param": param,
                                          "code": code}})


# --- request translation (pure) ------------------------------------------------------------


def _text(raw: Any, where: str) -> str:
    """A message's content as text: a string, null, or a list of text parts."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, list):
        raise RequestError(where, f"must be a string or an array of text parts, got "
                                  f"{_kind(raw)}")
    parts = []
    for j, part in enumerate(raw):
        if isinstance(part, str):
            parts.append(part)
            continue
        if not isinstance(part, dict):
            raise RequestError(f"{where}[{j}]", f"must be an object, got {_kind(part)}")
        kind = part.get("type", "text")
        if kind not in ("text", "refusal"):
            raise RequestError(f"{where}[{j}].type",
                               f"only text parts are supported, got {kind!r}")
        value = part.get(kind)
        if not isinstance(value, str):
            raise RequestError(f"{where}[{j}].{kind}", "must be a string")
        parts.append(value)
    return "\n".join(parts)


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError(where, f"must be an array, got {_kind(raw)}")
    calls = []
    for k, item in enumerate(raw):
        at = f"{where}[{k}]"
        if not isinstance(item, dict):
            raise RequestError(at, f"must be an object, got {_kind(item)}")
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise RequestError(f"{at}.id", "must be a non-empty string")
        if item.get("type", "function") != "function":
            raise RequestError(f"{at}.type", f"only 'function' is supported, got "
                                             f"{item.get('type')!r}")
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise RequestError(f"{at}.function", "must be an object with name and arguments")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{at}.function.name", "must be a non-empty string")
        calls.append(_call(call_id, name, fn.get("arguments"), f"{at}.function.arguments"))
    return tuple(calls)


def _call(call_id: str, name: str, raw: Any, where: str) -> ToolCall:
    """A tool call of the history; arguments that are not a JSON object are kept raw with
    their parse error, as providers record them."""
    if raw is None or raw == "":
        return ToolCall(id=call_id, name=name, raw_arguments=raw)
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, arguments=raw)
    if not isinstance(raw, str):
        raise RequestError(where, f"must be a JSON string, got {_kind(raw)}")
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        parse_error=f"arguments are not JSON: {err}")
    if not isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        parse_error=f"arguments are a JSON {_kind(parsed)}, not an object")
    return ToolCall(id=call_id, name=name, arguments=parsed, raw_arguments=raw)


def _messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise RequestError("messages", "must be a non-empty array of message objects")
    names: dict[str, str] = {}
    out = []
    for i, item in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(item, dict):
            raise RequestError(where, f"must be an object, got {_kind(item)}")
        role = item.get("role")
        content = _text(item.get("content"), f"{where}.content")
        if role in ("system", "developer"):
            out.append(Message.system(content))
        elif role == "user":
            out.append(Message.user(content))
        elif role == "assistant":
            calls = _tool_calls(item.get("tool_calls"), f"{where}.tool_calls")
            names.update((c.id, c.name) for c in calls)
            out.append(Message.assistant(content, calls))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise RequestError(f"{where}.tool_call_id", "must be a non-empty string")
            name = names.get(call_id) or item.get("name")
            out.append(Message(role="tool", content=content, tool_call_id=call_id,
                               tool_name=name if isinstance(name, str) else None))
        else:
            raise RequestError(f"{where}.role", "must be one of system, developer, user, "
                                                f"assistant, tool; got {role!r}")
    return out


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("tools", f"must be an array, got {_kind(raw)}")
    specs = []
    for i, item in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(item, dict):
            raise RequestError(where, f"must be an object, got {_kind(item)}")
        if item.get("type", "function") != "function":
            raise RequestError(f"{where}.type",
                               f"only 'function' tools are supported, got {item.get('type')!r}")
        fn = item.get("function")
        if not isinstance(fn, dict):
            raise RequestError(f"{where}.function", "must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{where}.function.name", "must be a non-empty string")
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise RequestError(f"{where}.function.description", "must be a string")
        parameters = fn.get("parameters")
        if parameters is None:
            parameters = EMPTY_PARAMETERS
        if not isinstance(parameters, dict):
            raise RequestError(f"{where}.function.parameters", "must be a JSON schema object")
        specs.append(ToolSpec(name=name, description=description, parameters=parameters))
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RequestError("tools", f"duplicate tool name(s): {', '.join(dupes)}")
    return tuple(specs)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, tuple[ToolSpec, ...]]:
    """(ModelSettings.tool_choice, the tools to offer)."""
    if raw is None or raw == "auto":
        return "auto", tools
    if raw == "required":
        return "required", tools
    if raw == "none":
        return "auto", ()
    if isinstance(raw, dict) and raw.get("type") == "function":
        fn = raw.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        chosen = tuple(t for t in tools if t.name == name)
        if not chosen:
            raise RequestError("tool_choice.function.name",
                               f"names no tool of the request: {name!r}")
        return "required", chosen
    raise RequestError("tool_choice", "must be 'auto', 'required', 'none' or "
                                      f'{{"type": "function", ...}}, got {raw!r}')


def _response_format(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RequestError("response_format", f"must be an object, got {_kind(raw)}")
    kind = raw.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT_FORMAT
    if kind == "json_schema":
        inner = raw.get("json_schema")
        if not isinstance(inner, dict):
            raise RequestError("response_format.json_schema", "must be an object")
        if not isinstance(inner.get("schema"), dict):
            raise RequestError("response_format.json_schema.schema",
                               "must be a JSON schema object")
        return {"type": "json_schema", "json_schema": inner}
    raise RequestError("response_format.type",
                       f"must be 'text', 'json_object' or 'json_schema', got {kind!r}")


def _number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            low <= value <= high):
        raise RequestError(key, f"must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _integer(body: Mapping[str, Any], key: str, low: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None
                                                                 and value < low):
        bound = f" of at least {low}" if low is not None else ""
        raise RequestError(key, f"must be an integer{bound}, got {value!r}")
    return value


def parse_chat_request(body: Any) -> ChatCall:
    """Translate an OpenAI chat-completions body; a RequestError names the bad field."""
    if not isinstance(body, dict):
        raise RequestError("body", f"must be a JSON object, got {_kind(body)}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("model", f"must be a string, got {_kind(model)}")
    messages = _messages(body.get("messages"))
    choice, tools = _tool_choice(body.get("tool_choice"), _tools(body.get("tools")))
    temperature = _number(body, "temperature", 0.0, 2.0)
    max_tokens = _integer(body, "max_completion_tokens", 1) or _integer(body, "max_tokens", 1)
    seed = _integer(body, "seed")
    n = _integer(body, "n", 1)
    if n not in (None, 1):
        raise RequestError("n", f"only 1 choice is supported, got {n}")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise RequestError("stream", f"must be a boolean, got {_kind(stream)}")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise RequestError("stream_options", f"must be an object, got {_kind(options)}")
    settings = ModelSettings(
        temperature=temperature,
        max_tokens=max_tokens or ModelSettings().max_tokens,
        seed=seed,
        response_format=_response_format(body.get("response_format")),
        tool_choice="required" if choice == "required" else "auto",
    )
    return ChatCall(messages=messages, tools=tools, settings=settings, model=model,
                    stream=stream, include_usage=bool(options.get("include_usage")))


# --- response translation (pure) -----------------------------------------------------------


def _openai_tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = (call.raw_arguments if call.raw_arguments is not None
                 else json.dumps(call.arguments, ensure_ascii=False))
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": arguments}}


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}


def _finish(response: ModelResponse) -> str:
    return "tool_calls" if response.tool_calls else _FINISH.get(response.stop_reason, "stop")


def chat_response(response: ModelResponse, model: str) -> dict[str, Any]:
    """The OpenAI `chat.completion` object of one ModelResponse."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.text if response.text or not response.tool_calls else None,
        "refusal": None,
    }
    if response.tool_calls:
        message["tool_calls"] = [_openai_tool_call(c) for c in response.tool_calls]
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(response),
                     "logprobs": None}],
        "usage": _usage(response.usage),
    }


def chat_stream(response: ModelResponse, model: str, include_usage: bool) -> bytes:
    """The same reply as a complete server-sent-events body of `chat.completion.chunk`s."""
    base = {"id": f"chatcmpl-{secrets.token_hex(12)}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    delta: dict[str, Any] = {"role": "assistant", "content": response.text or ""}
    if response.tool_calls:
        delta["tool_calls"] = [{"index": i, **_openai_tool_call(c)}
                               for i, c in enumerate(response.tool_calls)]
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": _finish(response)}]},
    ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(response.usage)})
    lines = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    return ("".join(lines) + "data: [DONE]\n\n").encode("utf-8")


# --- the server -----------------------------------------------------------------------------


class ModelGateway:
    """The loopback chat-completions server; one per run, one token per trial.

    `async with ModelGateway() as gateway:` starts and closes it. Every method but `start`
    and `aclose` is synchronous and must be called on the gateway's event loop.
    """

    def __init__(self, host: str = HOST) -> None:
        self._host = host
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._routes: dict[str, _Route] = {}
        self._connections: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ModelGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Listen on the loopback interface, on a free port."""
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._serve, self._host, 0,
                                                  limit=MAX_HEADER_BYTES)
        self._port = int(self._server.sockets[0].getsockname()[1])

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the model gateway is not started")
        return self._port

    def base_url_for(self, token: str) -> str:
        """The OpenAI base URL (ends in /v1) an agent uses with `api_key=token`."""
        return f"http://{self._host}:{self.port}/t/{token}/v1"

    def register(self, client: ModelClient, transcript: Transcript | None = None) -> str:
        """A fresh token routing to `client`; each call through it is recorded in
        `transcript` (the assistant message, model calls, usage, retries, model time)."""
        token = f"pl-{secrets.token_urlsafe(24)}"
        self._routes[token] = _Route(client, transcript)
        return token

    def unregister(self, token: str) -> list[str]:
        """Revoke `token`: later requests get 401, requests in flight are cancelled (their
        connection is closed) and nothing more is recorded in its transcript. Returns the
        token's errors (see `errors`)."""
        route = self._routes.pop(token, None)
        if route is None:
            return []
        route.revoked = True
        for task in list(route.in_flight):
            task.cancel()
        return list(route.errors)

    def errors(self, token: str) -> list[str]:
        """The model or infrastructure errors requests with `token` met (redacted), oldest
        first; empty for an unknown token. Non-empty: count the trial errored, not failed."""
        route = self._routes.get(token)
        return list(route.errors) if route is not None else []

    def tokens(self) -> tuple[str, ...]:
        """The live tokens (for callers that redact what they write)."""
        return tuple(self._routes)

    def usage(self, token: str) -> Usage:
        """The tokens spent through `token` so far."""
        route = self._routes.get(token)
        return route.usage if route is not None else Usage()

    def calls(self, token: str) -> int:
        """How many model calls through `token` were answered."""
        route = self._routes.get(token)
        return route.calls if route is not None else 0

    async def aclose(self) -> None:
        """Stop listening and drop open connections (requests in flight are cancelled)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await server.wait_closed()
        self._routes.clear()

    # --- HTTP ------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    request = await asyncio.wait_for(_read_request(reader, writer),
                                                     IDLE_TIMEOUT_S)
                except _HttpError as err:
                    await _send(writer, err.reply, keep_alive=False)
                    break
                if request is None:
                    break
                reply = await self._dispatch(request)
                await _send(writer, reply, keep_alive=request.keep_alive)
                if not request.keep_alive:
                    break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # closed by aclose or unregister; ending quietly keeps asyncio's
            # connection callback (which reads task.exception()) from logging an error
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    def _token(self, request: _HttpRequest) -> tuple[str | None, str]:
        """(token, endpoint path after the token)."""
        path = request.path.split("?", 1)[0]
        segments = [s for s in path.split("/") if s]
        if len(segments) >= 2 and segments[0] == "t":
            return segments[1], "/".join(segments[2:])
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        return token or None, "/".join(segments)

    async def _dispatch(self, request: _HttpRequest) -> _Reply:
        token, endpoint = self._token(request)
        route = self._routes.get(token) if token else None
        if route is None:
            return error_reply(401, "unknown or expired model gateway token",
                               "authentication_error", code="invalid_api_key")
        assert token is not None
        if endpoint in ("v1/chat/completions", "chat/completions"):
            if request.method != "POST":
                return error_reply(405, f"{request.method} not allowed: use POST",
                                   "invalid_request_error")
            return await self._chat(token, route, request.body)
        if endpoint in ("v1/models", "models") or endpoint.startswith(("v1/models/",
                                                                       "models/")):
            if request.method != "GET":
                return error_reply(405, f"{request.method} not allowed: use GET",
                                   "invalid_request_error")
            model = {"id": route.client.model_id, "object": "model", "created": 0,
                     "owned_by": "promptloop"}
            if endpoint.endswith("models"):
                return _Reply.json(200, {"object": "list", "data": [model]})
            return _Reply.json(200, model)
        return error_reply(404, f"no such endpoint: /{endpoint} (served: /v1/chat/completions, "
                                "/v1/models)", "invalid_request_error")

    def _redact(self, text: str) -> str:
        return redact(text, extra=self._routes)

    async def _chat(self, token: str, route: _Route, body: bytes) -> _Reply:
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            return error_reply(400, f"body: not JSON ({err})", "invalid_request_error", "body")
        try:
            call = parse_chat_request(data)
        except RequestError as err:
            return error_reply(400, str(err), "invalid_request_error", err.param)
        transcript = route.transcript
        started = time.perf_counter()
        task = asyncio.current_task()
        if task is not None:
            route.in_flight.add(task)
        try:
            response = await route.client.complete(call.messages, tools=call.tools,
                                                    settings=call.settings)
        except ModelError as err:
            message = self._redact(f"{type(err).__name__}: {err}")
            self._failed(route, message)
            return error_reply(502, message, "upstream_error", code="model_error")
        except Exception as err:
            message = self._redact(
                f"promptloop bug: the model client raised {type(err).__name__}: {err}")
            self._failed(route, message)
            return error_reply(500, message, "server_error", code="gateway_error")
        finally:
            if task is not None:
                route.in_flight.discard(task)
            if transcript is not None and not route.revoked:
                transcript.metrics.model_seconds += time.perf_counter() - started
        if route.revoked:  # the trial ended while the model was answering
            return error_reply(401, "the model gateway token was revoked during the call",
                               "authentication_error", code="invalid_api_key")
        route.calls += 1
        route.usage = route.usage + response.usage
        if transcript is not None:
            metrics = transcript.metrics
            metrics.n_model_calls += 1
            metrics.usage = metrics.usage + response.usage
            if response.retries:
                metrics.n_retries += response.retries
                transcript.event("retry", f"{response.retries} retried attempt(s)")
            transcript.messages.append(Message.assistant(response.text, response.tool_calls))
        model = response.model or route.client.model_id
        if call.stream:
            return _Reply(200, chat_stream(response, model, call.include_usage),
                          "text/event-stream")
        return _Reply.json(200, chat_response(response, model))

    @staticmethod
    def _failed(route: _Route, message: str) -> None:
        route.errors.append(message)
        if route.transcript is not None and not route.revoked:
            route.transcript.event("infra_error", message)


async def _read_request(reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> _HttpRequest | None:
    """One HTTP/1.1 request, or None at a clean end of the connection."""
    try:
        line = await reader.readline()
        while line in (b"\r\n", b"\n"):
            line = await reader.readline()
        if not line:
            return None
        parts = line.decode("latin-1").strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _HttpError(400, "malformed HTTP request line")
        method, target, version = parts
        headers: dict[str, str] = {}
        size = len(line)
        while True:
            raw = await reader.readline()
            size += len(raw)
            if size > MAX_HEADER_BYTES:
                raise _HttpError(431, "request headers too large")
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                raise _HttpError(400, "malformed HTTP header line")
            headers[name.strip().lower()] = value.strip()
    except ValueError as err:  # a line over the stream limit
        raise _HttpError(431, "request line or header too large") from err
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version != "HTTP/1.0" else "keep-alive" in connection
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            raise _HttpError(400, "malformed Content-Length header") from None
        if length < 0:
            raise _HttpError(400, "malformed Content-Length header")
        if length > MAX_BODY_BYTES:
            raise _HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
        body = await reader.readexactly(length) if length else b""
    return _HttpRequest(method.upper(), target, headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        try:
            size_line = await reader.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
        except ValueError:
            raise _HttpError(400, "malformed chunked body") from None
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(body)
        if len(body) + size > MAX_BODY_BYTES:
            raise _HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def _send(writer: asyncio.StreamWriter, reply: _Reply, *, keep_alive: bool) -> None:
    head = [
        f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Error')}",
        f"Content-Type: {reply.content_type}; charset=utf-8"
        if reply.content_type == "application/json" else f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    if reply.status >= 400:
        head.append("x-should-retry: false")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)
    await writer.drain()


__all__ = [
    "ChatCall",
    "ModelGateway",
    "RequestError",
    "chat_response",
    "chat_stream",
    "parse_chat_request",
]
