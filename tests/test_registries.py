"""The registries ARCHITECTURE.md names ("Where to add") are the only way in: a provider, a
grader or a CLI command that bypasses its registry fails here."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import typer.main

ROOT = Path(__file__).resolve().parents[1] / "promptloop"


def _decorated_names(path: Path, decorator: str) -> list[str]:
    """First argument of every `@decorator("name", ...)` on a function of `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in node.decorator_list:
                if (isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
                        and d.func.id == decorator and d.args
                        and isinstance(d.args[0], ast.Constant)):
                    out.append(str(d.args[0].value))
    return out


def test_every_provider_module_is_registered_in_providers_init() -> None:
    from promptloop.agents.llm import providers

    seen: dict[str, str] = {}

    def record(name: str, factory, *, accepts_seed: bool = False) -> None:  # type: ignore[no-untyped-def]
        seen[factory.__module__.rsplit(".", 1)[-1]] = name

    providers.register_all(record)
    modules = {p.stem for p in (ROOT / "agents/llm/providers").glob("*.py")
               if p.stem not in ("__init__", "common")}
    missing = modules - set(seen)
    assert not missing, f"provider modules not registered in providers/__init__.py: {missing}"
    from promptloop.agents.llm.registry import _known_providers

    assert set(seen.values()) <= set(_known_providers())


def test_every_provider_has_prices_or_is_free() -> None:
    """Every registered provider is priced in core/pricing.py (or free): a new provider that
    skips the price table fails here."""
    from promptloop.agents.llm.registry import _known_providers
    from promptloop.optimizer.core.pricing import FREE_PROVIDERS, PRICES

    unpriced = [p for p in _known_providers() if p not in FREE_PROVIDERS and p not in PRICES]
    assert not unpriced, f"providers with no price table entry: {unpriced}"


def test_every_grader_is_registered_and_its_module_loaded() -> None:
    from promptloop.graders import registry

    known = set(registry.known_graders())
    assert len(_decorated_names(ROOT / "graders/judge.py", "register")) == 4
    for path in sorted((ROOT / "graders").glob("*.py")):
        names = _decorated_names(path, "register")
        if not names:
            continue
        assert f"promptloop.graders.{path.stem}" in registry._BUILTIN_MODULES, (
            f"graders/{path.stem}.py registers graders but is not in "
            "graders/registry._BUILTIN_MODULES")
        assert set(names) <= known, set(names) - known


def test_every_cli_command_module_is_registered_in_app() -> None:
    from promptloop.optimizer.cli.app import app

    group = typer.main.get_command(app)
    registered = {importlib.import_module(c.callback.__module__).__name__.rsplit(".", 1)[-1]
                  for c in group.commands.values()}  # type: ignore[attr-defined]
    helpers = {"__init__", "app", "command", "common", "help", "ui", "util"}
    modules = {p.stem for p in (ROOT / "optimizer/cli").glob("*.py")} - helpers
    missing = modules - registered
    assert not missing, f"CLI command modules not registered in cli/app.py: {missing}"


def test_every_viewer_page_template_has_a_route() -> None:
    source = (ROOT / "optimizer/view").glob("*.py")
    used = {t for p in source
            for t in re.findall(r"view_[a-z_]+\.html\.j2", p.read_text(encoding="utf-8"))}
    partials = {"view_base.html.j2", "view_macros.html.j2", "view_nav.html.j2"}
    pages = {p.name for p in (ROOT / "optimizer/view/templates").glob("view_*.html.j2")}
    assert pages - partials <= used, f"page templates no view module renders: {pages - used}"
