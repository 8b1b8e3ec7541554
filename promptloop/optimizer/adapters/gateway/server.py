"""The model gateway's server: a loopback HTTP endpoint in front of promptloop's own model
clients, one token per trial, speaking two wire protocols.

An agent written in any language talks to `base_url_for(token)` with `api_key=token`, exactly
as it would talk to OpenAI (`POST .../v1/chat/completions`, gateway/openai.py) or to Anthropic
(`POST .../v1/messages`, gateway/anthropic.py; the SDK's base URL is `anthropic_base_url_for`);
the gateway turns each request into one `ModelClient.complete(messages, tools=...,
settings=ModelSettings(...))` call of the client registered for that token and the reply back
into the protocol's response JSON. The real provider keys stay in promptloop's process: the
agent only ever sees a per-trial token, which dies with `unregister`.

Every answered call is recorded in the token's transcript (`promptloop.agents.transcript
.ConversationRecorder`): the messages as the agent sent them, the reply, each tool call with
the result the agent sent back on its next call, usage, retries and model time.

Also served: `GET /t/<token>/v1/models` (and `/v1/models/<id>`). The token may also come as
`Authorization: Bearer <token>` or `x-api-key: <token>` on `/v1/...` paths.

Errors are the protocol's JSON, with `x-should-retry: false` so the agent's SDK does not retry
what promptloop already retried: an unknown token is 401, a malformed body 400 naming the
field, a `ModelError` of the client 502 with its (redacted) message, any other exception of the
client 500. Both of the latter are kept per token (`errors(token)`): the trial is then counted
errored (infrastructure), not failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from promptloop.agents.llm.errors import ModelError
from promptloop.agents.llm.types import Message, ModelClient, ModelResponse, Usage
from promptloop.agents.transcript import ConversationRecorder, Transcript
from promptloop.optimizer.adapters.gateway import anthropic, openai
from promptloop.optimizer.adapters.gateway.common import ChatCall, RequestError
from promptloop.optimizer.adapters.gateway.http import (
    MAX_HEADER_BYTES,
    HttpError,
    HttpRequest,
    Reply,
    read_request,
    send,
)
from promptloop.optimizer.core.redact import redact

HOST = "127.0.0.1"
IDLE_TIMEOUT_S = 300.0
"""A connection that sends no complete request for this long is closed."""
CHAT = ("v1/chat/completions", "chat/completions")
MESSAGES = ("v1/messages", "messages")


@dataclass
class _Route:
    client: ModelClient
    transcript: Transcript | None
    recorder: ConversationRecorder | None = None
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)
    revoked: bool = False


@dataclass(frozen=True)
class _Protocol:
    """How one wire protocol reads a request and writes a reply or an error."""

    name: str
    parse: Any
    respond: Any
    stream: Any

    def error(self, status: int, message: str, kind: str, param: str | None = None,
              code: str | None = None) -> Reply:
        if self.name == "anthropic":
            return Reply.json(status, anthropic.error_body(status, message))
        return Reply.json(status, openai.error_body(message, kind, param, code))


OPENAI = _Protocol("openai", openai.parse_chat_request, openai.chat_response,
                   lambda r, model, call: openai.chat_stream(r, model, call.include_usage))
ANTHROPIC = _Protocol("anthropic", anthropic.parse_messages_request,
                      anthropic.message_response,
                      lambda r, model, call: anthropic.message_stream(r, model))


def error_reply(status: int, message: str, kind: str, param: str | None = None,
                code: str | None = None) -> Reply:
    """An OpenAI-shaped error reply."""
    return OPENAI.error(status, message, kind, param, code)


class ModelGateway:
    """The loopback model server (OpenAI chat completions and Anthropic messages); one per
    run, one token per trial.

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

    def anthropic_base_url_for(self, token: str) -> str:
        """The base URL an Anthropic SDK takes (it appends /v1/messages itself)."""
        return f"http://{self._host}:{self.port}/t/{token}"

    def register(self, client: ModelClient, transcript: Transcript | None = None) -> str:
        """A fresh token routing to `client`; each call through it is recorded in
        `transcript` (the messages sent, the reply, tool calls with the results sent back,
        model calls, usage, retries, model time)."""
        token = f"pl-{secrets.token_urlsafe(24)}"
        recorder = ConversationRecorder(transcript) if transcript is not None else None
        self._routes[token] = _Route(client, transcript, recorder)
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
                    request = await asyncio.wait_for(read_request(reader, writer),
                                                     IDLE_TIMEOUT_S)
                except HttpError as err:
                    await send(writer, error_reply(err.status, str(err), "invalid_request_error"),
                               keep_alive=False)
                    break
                if request is None:
                    break
                reply = await self._dispatch(request)
                await send(writer, reply, keep_alive=request.keep_alive)
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

    def _token(self, request: HttpRequest) -> tuple[str | None, str]:
        """(token, endpoint path after the token)."""
        path = request.path.split("?", 1)[0]
        segments = [s for s in path.split("/") if s]
        if len(segments) >= 2 and segments[0] == "t":
            return segments[1], "/".join(segments[2:])
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        token = token or request.headers.get("x-api-key", "").strip()
        return token or None, "/".join(segments)

    async def _dispatch(self, request: HttpRequest) -> Reply:
        token, endpoint = self._token(request)
        protocol = ANTHROPIC if endpoint in MESSAGES else OPENAI
        route = self._routes.get(token) if token else None
        if route is None:
            return protocol.error(401, "unknown or expired model gateway token",
                                  "authentication_error", code="invalid_api_key")
        assert token is not None
        if endpoint in CHAT or endpoint in MESSAGES:
            if request.method != "POST":
                return protocol.error(405, f"{request.method} not allowed: use POST",
                                      "invalid_request_error")
            return await self._complete(protocol, route, request.body)
        if endpoint in ("v1/models", "models") or endpoint.startswith(("v1/models/",
                                                                       "models/")):
            if request.method != "GET":
                return error_reply(405, f"{request.method} not allowed: use GET",
                                   "invalid_request_error")
            model = {"id": route.client.model_id, "object": "model", "created": 0,
                     "owned_by": "promptloop"}
            if endpoint.endswith("models"):
                return Reply.json(200, {"object": "list", "data": [model]})
            return Reply.json(200, model)
        return error_reply(404, f"no such endpoint: /{endpoint} (served: /v1/chat/completions, "
                                "/v1/messages, /v1/models)", "invalid_request_error")

    def _redact(self, text: str) -> str:
        return redact(text, extra=self._routes)

    async def _complete(self, protocol: _Protocol, route: _Route, body: bytes) -> Reply:
        """One model call in `protocol`'s shapes, metered and recorded on `route`."""
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            return protocol.error(400, f"body: not JSON ({err})", "invalid_request_error",
                                  "body")
        try:
            call: ChatCall = protocol.parse(data)
        except RequestError as err:
            return protocol.error(400, str(err), "invalid_request_error", err.param)
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
            return protocol.error(502, message, "upstream_error", code="model_error")
        except Exception as err:
            message = self._redact(
                f"promptloop bug: the model client raised {type(err).__name__}: {err}")
            self._failed(route, message)
            return protocol.error(500, message, "server_error", code="gateway_error")
        finally:
            if task is not None:
                route.in_flight.discard(task)
            if transcript is not None and not route.revoked:
                transcript.metrics.model_seconds += time.perf_counter() - started
        if route.revoked:  # the trial ended while the model was answering
            return protocol.error(401, "the model gateway token was revoked during the call",
                                  "authentication_error", code="invalid_api_key")
        self._metered(route, call, response)
        model = response.model or route.client.model_id
        if call.stream:
            return Reply(200, protocol.stream(response, model, call), "text/event-stream")
        return Reply.json(200, protocol.respond(response, model))

    @staticmethod
    def _metered(route: _Route, call: ChatCall, response: ModelResponse) -> None:
        route.calls += 1
        route.usage = route.usage + response.usage
        transcript = route.transcript
        if transcript is None:
            return
        metrics = transcript.metrics
        metrics.n_model_calls += 1
        metrics.usage = metrics.usage + response.usage
        if response.retries:
            metrics.n_retries += response.retries
            transcript.event("retry", f"{response.retries} retried attempt(s)")
        if route.recorder is not None:
            route.recorder.call(call.messages, Message.assistant(response.text,
                                                                 response.tool_calls))

    @staticmethod
    def _failed(route: _Route, message: str) -> None:
        route.errors.append(message)
        if route.transcript is not None and not route.revoked:
            route.transcript.event("infra_error", message)

