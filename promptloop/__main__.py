"""`python -m promptloop ...` and the `promptloop` script: the same command line.

`run` imports the CLI inside its own guard: a Ctrl-C during the first half second (the
imports) ends as a stop does elsewhere (`Error: interrupted`, exit 130), not in a traceback."""

from __future__ import annotations

import sys


def run() -> None:
    try:
        from promptloop.optimizer.cli.app import main
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        raise SystemExit(130) from None
    main()


if __name__ == "__main__":
    run()
