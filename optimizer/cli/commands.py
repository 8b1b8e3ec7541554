"""CLI commands that live in their own modules; each exposes `register(app)`."""

from __future__ import annotations

import typer

from optimizer.cli import doctor, nightly, review


def register_all(app: typer.Typer) -> None:
    for module in (nightly, review, doctor):
        module.register(app)
