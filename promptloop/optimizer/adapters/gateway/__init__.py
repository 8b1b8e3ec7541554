"""The model gateway: a loopback endpoint in front of promptloop's own model clients, which an
agent outside promptloop calls as it would call OpenAI or Anthropic (docs/agents.md).

- `server`: `ModelGateway`, the HTTP server, its tokens (one per trial), metering, errors and
  the record of every call in the trial's transcript;
- `openai`: the OpenAI chat-completions translation (`POST /v1/chat/completions`);
- `anthropic`: the Anthropic Messages API translation (`POST /v1/messages`);
- `common`: what both share (the translated call, `RequestError`); `http`: HTTP/1.1 plumbing.
"""

from promptloop.optimizer.adapters.gateway.anthropic import (
    message_response,
    message_stream,
    parse_messages_request,
)
from promptloop.optimizer.adapters.gateway.common import ChatCall, RequestError
from promptloop.optimizer.adapters.gateway.openai import (
    JSON_OBJECT_FORMAT,
    chat_response,
    chat_stream,
    parse_chat_request,
)
from promptloop.optimizer.adapters.gateway.server import HOST, ModelGateway, error_reply

__all__ = [
    "HOST",
    "JSON_OBJECT_FORMAT",
    "ChatCall",
    "ModelGateway",
    "RequestError",
    "chat_response",
    "chat_stream",
    "error_reply",
    "message_response",
    "message_stream",
    "parse_chat_request",
    "parse_messages_request",
]
