"""A raw HTTP client for the viewer's tests: sends the request target exactly as written."""

from __future__ import annotations

import http.client
from dataclasses import dataclass

from promptloop.optimizer.view.server import ViewServer


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def request(server: ViewServer, target: str, method: str = "GET",
            headers: dict[str, str] | None = None, body: bytes | None = None) -> Reply:
    """`method target` with the target unnormalized (no client-side `..` resolution)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        sent = {"Host": f"127.0.0.1:{server.port}", **(headers or {})}
        if body is not None:
            sent["Content-Length"] = str(len(body))
        for key, value in sent.items():
            conn.putheader(key, value)
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


def get(server: ViewServer, target: str) -> Reply:
    return request(server, target)
