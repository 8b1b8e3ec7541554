"""The gateway's HTTP/1.1 plumbing: reading one request (bounded), writing one reply."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

MAX_BODY_BYTES = 32 * 1024 * 1024
"""A request body larger than this is refused (413) without being read."""
MAX_HEADER_BYTES = 64 * 1024
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 413: "Payload Too Large", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 502: "Bad Gateway",
}



@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, payload: Any) -> Reply:
        return cls(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"))


class HttpError(Exception):
    """A request that cannot be read: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_request(reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> HttpRequest | None:
    """One HTTP/1.1 request, or None at a clean end of the connection."""
    try:
        line = await reader.readline()
        while line in (b"\r\n", b"\n"):
            line = await reader.readline()
        if not line:
            return None
        parts = line.decode("latin-1").strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise HttpError(400, "malformed HTTP request line")
        method, target, version = parts
        headers: dict[str, str] = {}
        size = len(line)
        while True:
            raw = await reader.readline()
            size += len(raw)
            if size > MAX_HEADER_BYTES:
                raise HttpError(431, "request headers too large")
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                raise HttpError(400, "malformed HTTP header line")
            headers[name.strip().lower()] = value.strip()
    except ValueError as err:  # a line over the stream limit
        raise HttpError(431, "request line or header too large") from err
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
            raise HttpError(400, "malformed Content-Length header") from None
        if length < 0:
            raise HttpError(400, "malformed Content-Length header")
        if length > MAX_BODY_BYTES:
            raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
        body = await reader.readexactly(length) if length else b""
    return HttpRequest(method.upper(), target, headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        try:
            size_line = await reader.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
        except ValueError:
            raise HttpError(400, "malformed chunked body") from None
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return bytes(body)
        if len(body) + size > MAX_BODY_BYTES:
            raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def send(writer: asyncio.StreamWriter, reply: Reply, *, keep_alive: bool) -> None:
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



__all__ = ["MAX_BODY_BYTES", "MAX_HEADER_BYTES", "HttpError", "HttpRequest", "Reply",
           "read_request", "send"]
