"""`promptloop view`: serve the read-only web viewer of the state folder until Ctrl-C (exit
130, like every command a Ctrl-C stops)."""

from __future__ import annotations

import errno
import os
import socket
import sys
import webbrowser
from typing import Annotated

import typer

from promptloop.optimizer.cli import ui
from promptloop.optimizer.cli.common import JsonOpt, StateOpt
from promptloop.optimizer.cli.util import guarded
from promptloop.optimizer.view.server import ViewServer, make_server
from promptloop.optimizer.workflows.context import ConfigError
from promptloop.optimizer.workflows.context import state_dir as resolve_state


def view(
    port: Annotated[
        int, typer.Option("--port", envvar="PROMPTLOOP_VIEW_PORT", min=0, max=65535,
                          help="Port to listen on (0: any free port).")
    ] = 8765,
    host: Annotated[
        str, typer.Option("--host", envvar="PROMPTLOOP_VIEW_HOST",
                          help="Address to bind. The default is loopback only; anything else "
                          "shows your runs and transcripts to the network.")
    ] = "127.0.0.1",
    state_dir: StateOpt = None,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the runs list in a web browser.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Log every request on stderr.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Browse runs, comparisons, optimize sessions, the ledger and nightly runs in a browser
    (read-only; bound to 127.0.0.1 unless --host says otherwise).

    Serves until Ctrl-C, which exits 130. With --json, the envelope is printed as soon as the
    server listens (its url, host, port, pid and state folder), so a script can read where
    to go and stop it by its pid."""
    state = resolve_state(state_dir, write=False)

    def start() -> ViewServer:
        if state_dir is not None and not state.is_dir():
            raise ConfigError(f"--state-dir {state}: no such folder")
        try:
            return make_server(state, host, port, verbose=verbose)
        except OSError as err:
            raise ConfigError(_listen_error(host, port, err)) from None

    server = guarded(start)
    if host not in ("127.0.0.1", "localhost", "::1"):
        ui.warn(f"listening on {host}: anyone who can reach this address can read the runs")
    if not state.is_dir():
        ui.warn(f"{state} does not exist yet: the pages stay empty until a run is saved")
    if not as_json or sys.stderr.isatty():  # --json: progress only on a terminal
        ui.info(f"promptloop view: serving {state} at {server.url} (Ctrl-C to stop)")
    if as_json:
        ui.print_json({"url": server.url, "host": host, "port": server.port,
                       "pid": os.getpid(), "state_dir": str(state)})
        ui.write_envelope("view", 0)  # now, not when the server stops
    if open_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C (130) or SIGTERM (143)
        ui.info("stopped")
        raise typer.Exit(ui.stopped()[0]) from None
    finally:
        server.server_close()


def _listen_error(host: str, port: int, err: OSError) -> str:
    """Why the server cannot listen, blaming the option at fault: an address that does not
    resolve or is not this machine's is --host's, a port in use or reserved is --port's."""
    why = err.strerror or str(err)
    if isinstance(err, socket.gaierror) or err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return (f"--host {host!r} is not an address of this machine ({why}); give an IP "
                "address or host name it can listen on, e.g. 127.0.0.1 or 0.0.0.0")
    if err.errno == errno.EADDRINUSE:
        return f"cannot listen on {host}:{port}: the port is in use; pick another --port"
    return f"cannot listen on {host}:{port} ({why}); check --host and --port"
