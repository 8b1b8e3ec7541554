"""Issue 32 item 9: ARCHITECTURE.md's claims about the CLI hold: ui.py is the only module that
imports rich, cli/util.py does not import cli/command.py (no cycle, not even inside a
function), and no code cites a SPEC that is not in the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("agents", "graders", "optimizer")


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def python_files() -> list[Path]:
    return [p for pkg in PACKAGES for p in (ROOT / "promptloop" / pkg).rglob("*.py")]


def test_only_ui_imports_rich() -> None:
    users = sorted(str(p.relative_to(ROOT)) for p in python_files()
                   if any(n == "rich" or n.startswith("rich.") for n in imported(p)))
    assert users == ["promptloop/optimizer/cli/ui.py"]


def test_util_does_not_import_command() -> None:
    util = ROOT / "promptloop/optimizer/cli/util.py"
    assert "promptloop.optimizer.cli.command" not in imported(util)


def test_code_cites_repository_docs_not_a_spec_section() -> None:
    cited = [f"{p.relative_to(ROOT)}" for p in python_files()
             if re.search(r"SPEC sections? \d", p.read_text(encoding="utf-8"))]
    assert not cited
    for doc in ("docs/compat.md", "docs/suites.md", "docs/differences.md"):
        assert (ROOT / doc).is_file()
    assert "## Graders and the pass rule" in (ROOT / "docs/compat.md").read_text()
