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

ROOT = Path(__file__).resolve().parents[1] / "promptloop" / "optimizer"
PREFIX = "promptloop."
"""Every import package lives under `promptloop`; the rules below name packages without it."""
LAYER = {"cli": 4, "view": 3, "workflows": 2, "propose": 1, "gate": 1, "run": 1, "report": 1,
         "git": 1, "git_sweep": 1, "git_read": 1, "lifecycle": 1, "adapters": 1, "core": 0,
         "sim": 5}
"""`sim` (the simulated worlds of the benchmarks) sits above everything: it may use any
package, and no production module may import it."""
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
            out += [a.name.removeprefix(PREFIX) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            module = node.module.removeprefix(PREFIX)
            out.append(module)
            out += [f"{module}.{a.name}" for a in node.names if module == "optimizer"]
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


def test_no_production_module_imports_the_simulator() -> None:
    bad = [f"{p.relative_to(ROOT)} imports {name}" for p in modules()
           if package_of(p) != "sim" for name in imports(p)
           if name == "optimizer.sim" or name.startswith("optimizer.sim.")]
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


# --- module-level cycles over agents, graders and optimizer -----------------------------------

PROJECT = ROOT.parent
PACKAGES = ("agents", "graders", "optimizer")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of the project `path` imports when it is imported: statements at module level
    (also inside a top-level `if`/`try`), not those inside functions or `if TYPE_CHECKING:`."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def resolve(name: str) -> str | None:
        name = name.removeprefix(PREFIX)
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                test = node.test
                if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                    walk(node.orelse)
                    continue
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)
                for h in node.handlers:
                    walk(h.body)
                walk(node.orelse)
                walk(node.finalbody)
            elif isinstance(node, ast.Import):
                out.update(t for a in node.names if (t := resolve(a.name)))
            elif isinstance(node, ast.ImportFrom):
                base = (node.module or "").removeprefix(PREFIX)
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for a in node.names:  # `from pkg import module` imports the module
                    target = resolve(f"{base}.{a.name}") if f"{base}.{a.name}" in known \
                        else resolve(base)
                    if target:
                        out.add(target)

    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    out.discard(me)
    return out


def module_graph() -> dict[str, set[str]]:
    paths = [p for pkg in PACKAGES for p in (PROJECT / pkg).rglob("*.py")]
    known = {_module_name(p) for p in paths}
    return {_module_name(p): _top_level_imports(p, known) for p in paths}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_find_cycles_sees_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycle() -> None:
    cycles = find_cycles(module_graph())
    assert not cycles, "module-level import cycles:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


CLI_TYPES = {"optimizer.core.events", "optimizer.core.results"}
"""What the CLI may import from core: the types it renders (events, run results)."""


def test_the_cli_calls_workflows_not_core_or_git_internals() -> None:
    """Every command goes through `workflows` (`workflows/context.py` for the lookups a command
    makes before it starts one); from core it takes only the types it renders."""
    wrong = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        for name in imports(path):
            inner = name.startswith(("optimizer.core", "optimizer.git"))
            if inner and name not in CLI_TYPES:
                wrong.append(f"{path.name}: {name}")
    assert not wrong, wrong


TOP = ROOT.parent
TOP_LAYERS = {"agents": 0, "graders": 1, "optimizer": 2}
"""Beyond optimizer/: the agents under test import neither graders nor promptloop's machinery,
graders import agents (types, transcripts) but never optimizer, and optimizer may import both."""


def test_agents_and_graders_never_import_upwards() -> None:
    bad: list[str] = []
    for package, level in TOP_LAYERS.items():
        for path in (TOP / package).rglob("*.py"):
            for name in imports(path):
                top = name.split(".")[0]
                if top in TOP_LAYERS and TOP_LAYERS[top] > level:
                    bad.append(f"{path.relative_to(TOP)} imports {name}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_optimizer_core_imports_no_provider() -> None:
    """core (redaction included) is below the model providers: it never imports one."""
    bad = [f"{p.relative_to(TOP)} imports {n}" for p in (ROOT / "core").rglob("*.py")
           for n in imports(p) if n.startswith("agents.llm.providers")]
    assert not bad, "\n".join(bad)


def test_the_tournament_uses_the_iteration_through_its_protocol() -> None:
    """Issue 26: the tournament reached into four private methods of `Iteration` (an import
    cycle under TYPE_CHECKING); it now types its host as `optimize_models.CandidateHost` and
    calls only public steps."""
    path = ROOT / "workflows" / "tournament.py"
    assert not [n for n in imports(path) if n.startswith("optimizer.workflows.iteration")]
    private = [node.attr for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Attribute) and node.attr.startswith("_")
               and not node.attr.startswith("__")
               and isinstance(node.value, ast.Attribute) and node.value.attr == "i"]
    assert not private, f"private members of the iteration used: {private}"
