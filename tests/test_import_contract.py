"""The import contract of optimizer/ (checked in CI):

    cli -> view -> workflows -> {propose, gate, run, report, git*, lifecycle} -> core

A package may import its own modules, any package on a lower layer and (within the middle
layer) a sibling, but never a higher layer; `gate` imports only `core` and itself and no I/O
module; `lifecycle` imports only `core`, `report`, `git` and itself; no module outside `cli`
imports `rich`; and the packages form no import cycle. The viewer (`view`) serves pages over
the state folder: it may read through `workflows` and below, never `cli`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "optimizer"
LAYER = {"cli": 4, "view": 3, "workflows": 2, "propose": 1, "gate": 1, "run": 1, "report": 1,
         "git": 1, "git_sweep": 1, "git_read": 1, "lifecycle": 1, "core": 0}
LIFECYCLE_IMPORTS = {"lifecycle", "core", "report", "git"}
IO_MODULES = {"os", "subprocess", "shutil", "socket", "asyncio", "tempfile", "git",
              "optimizer.git", "optimizer.git_sweep", "optimizer.git_read", "httpx", "anthropic",
              "openai", "filelock", "urllib"}


def package_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py") if rel.parts else ""


def imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names
                    if node.module == "optimizer"]
    return out


def modules() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if package_of(p) in LAYER]


def test_every_module_belongs_to_a_layer() -> None:
    stray = [p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"
             and p.stem not in LAYER]
    assert not stray, f"modules outside the layered packages: {stray}"


def test_layers_only_import_downwards() -> None:
    bad = []
    for path in modules():
        pkg = package_of(path)
        for name in imports(path):
            parts = name.split(".")
            if parts[0] != "optimizer" or len(parts) < 2 or parts[1] not in LAYER:
                continue
            target = parts[1]
            if target != pkg and LAYER[target] > LAYER[pkg]:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
            if pkg == "gate" and target not in ("gate", "core"):
                bad.append(f"{path.relative_to(ROOT)} (gate) imports {name}")
            if pkg == "lifecycle" and target not in LIFECYCLE_IMPORTS:
                bad.append(f"{path.relative_to(ROOT)} (lifecycle) imports {name}")
    assert not bad, "\n".join(bad)


def test_gate_is_pure_and_only_cli_imports_rich() -> None:
    bad = []
    for path in modules():
        pkg = package_of(path)
        for name in imports(path):
            root = name.split(".")[0]
            if pkg == "gate" and (root in IO_MODULES or name in IO_MODULES):
                bad.append(f"{path.relative_to(ROOT)} (gate) imports I/O module {name}")
            if root == "rich" and pkg != "cli":
                bad.append(f"{path.relative_to(ROOT)} imports rich")
    assert not bad, "\n".join(bad)


def test_no_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = {p: set() for p in LAYER}
    for path in modules():
        pkg = package_of(path)
        for name in imports(path):
            parts = name.split(".")
            if parts[0] == "optimizer" and len(parts) > 1 and parts[1] in LAYER \
                    and parts[1] != pkg:
                graph[pkg].add(parts[1])
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            assert seen.get(nxt) != 1, f"import cycle: {' -> '.join([*stack, node, nxt])}"
            if nxt not in seen:
                visit(nxt, [*stack, node])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [])
