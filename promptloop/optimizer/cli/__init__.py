"""The `promptloop` command line (typer); the only package that imports rich."""

from promptloop.optimizer.cli.app import main

__all__ = ["main"]
