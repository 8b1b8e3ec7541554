"""The HTTP side of `promptloop view`: a stdlib threading server, read-only, loopback by default.

Only GET and HEAD are answered; every other method gets 405 with `Allow: GET, HEAD`. Requests
whose Host header is not the address the server listens on (or a loopback name for it) are
refused, so a web page elsewhere cannot read the state folder through DNS rebinding. Every
response carries a Content-Security-Policy that allows scripts only from the viewer itself
(the pages' own files under /static/), no plugins, frames or form posts elsewhere, and
`nosniff`, so even a string that escaped escaping could not run.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from promptloop.optimizer.view.app import Response, ViewApp

CSP = ("default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
ALLOWED = ("GET", "HEAD")


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """Host header values accepted for a server on `host:port` (None: any, for a wildcard
    bind the user asked for explicitly)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    names = {host, f"[{host}]" if ":" in host else host}
    try:
        if ipaddress.ip_address(host).is_loopback:
            names.update(LOOPBACK_NAMES)
    except ValueError:
        if host == "localhost":
            names.update(LOOPBACK_NAMES)
    return {n.lower() for n in names} | {f"{n}:{port}".lower() for n in names}


class ViewHandler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    server_version = "promptloop-view"
    sys_version = ""

    def __getattr__(self, name: str) -> Any:
        # BaseHTTPRequestHandler dispatches to do_<METHOD>; every method but GET and HEAD
        # (including made-up ones) lands here and gets 405 rather than 501.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _not_allowed(self) -> None:
        self._send(Response(405, b"405 Method Not Allowed: the viewer is read-only\n",
                            "text/plain; charset=utf-8", {"Allow": ", ".join(ALLOWED)}),
                   head=False)

    def _answer(self, head: bool) -> None:
        hosts = self.server.hosts
        host = (self.headers.get("Host") or "").strip().lower()
        if hosts is not None and host not in hosts:
            self._send(Response(403, b"403 Forbidden: unexpected Host header\n",
                                "text/plain; charset=utf-8"), head)
            return
        try:
            response = self.server.app.handle(self.path)
        except Exception as err:  # a bug must not kill the request thread silently
            self.log_error("error answering %s: %r", self.path, err)
            response = Response(500, b"500 Internal Server Error\n", "text/plain; charset=utf-8")
        self._send(response, head)

    def _send(self, r: Response, head: bool) -> None:
        self.send_response(r.status, HTTPStatus(r.status).phrase)
        for key, value in {**SECURITY_HEADERS, "Content-Type": r.content_type,
                           "Content-Length": str(len(r.body)), "Cache-Control": "no-store",
                           **r.headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(r.body)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, app: ViewApp, host: str, port: int, *, verbose: bool = False) -> None:
        self.app = app
        self.verbose = verbose
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), ViewHandler)
        self.hosts = allowed_hosts(host, self.port)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        shown = "127.0.0.1" if host == "0.0.0.0" else f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"


def make_server(state_dir: Path, host: str = "127.0.0.1", port: int = 8765,
                *, verbose: bool = False) -> ViewServer:
    """A server for `state_dir` bound to `host:port` (port 0: any free port); not started."""
    return ViewServer(ViewApp(state_dir), host, port, verbose=verbose)


@contextmanager
def running(state_dir: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[ViewServer]:
    """A server answering in a background thread for the duration of the block (tests,
    benchmarks, screenshots)."""
    server = make_server(state_dir, host, port)
    thread = threading.Thread(target=server.serve_forever, name="promptloop-view", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
