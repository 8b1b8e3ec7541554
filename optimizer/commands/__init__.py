"""CLI commands that live in their own modules; each exposes `register(app)`."""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES = ("nightly", "review", "doctor")


def register_all(app: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"optimizer.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"optimizer.commands.{name}":
                raise
            continue  # not built yet
        module.register(app)
