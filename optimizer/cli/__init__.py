"""The `promptloop` command line (typer); the only package that imports rich."""

from optimizer.cli.app import main

__all__ = ["main"]
