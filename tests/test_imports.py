"""The import layers (docs/architecture.md): the decider's packages by concern, each importing only the
packages below it; the service's layers; and no import cycle at run time anywhere in service/.

Imports are read from the source (ast): a module-level import runs when the module loads; one inside a
function runs when it is called; both are dependencies. Imports under `if TYPE_CHECKING:` are types
only and count for neither."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "service"

# The decider's packages, lowest first: each may import those before it, never one after it.
DOMAIN_LAYERS = ["model", "nodes", "dra", "state", "placement", "fold", "trees", "preemption", "decide", "read"]

# What each top-level part of service/ must never import (the adapters sit above the application,
# the application above the domain; the domain imports nothing of the service outside itself).
FORBIDDEN = {
    "domain": {"api", "app", "bootstrap", "cli", "config", "kafka", "schemas", "store", "replica", "metrics",
               "logging", "clock", "process", "gcpause", "contracts"},
    "store": {"api", "app", "bootstrap", "cli", "kafka", "schemas", "domain"},
    "app": {"api", "bootstrap", "cli", "kafka", "schemas"},
    "schemas": {"api", "bootstrap", "cli", "kafka", "store"},
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in SERVICE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path, *, runtime_only: bool) -> set[str]:
    """The service modules `path` imports: at load time only, or anywhere (functions included)."""
    found: set[str] = set()

    def target(module: str, name: str | None) -> str | None:
        if name is not None and f"{module}.{name}" in MODULES:
            return f"{module}.{name}"
        return module if module in MODULES else None

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not runtime_only:
                    visit(node.body)
                continue
            if isinstance(node, ast.Import):
                found.update(t for a in node.names if (t := target(a.name, None)))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.update(t for a in node.names if (t := target(node.module, a.name)))
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    visit(block)
            for handler in getattr(node, "handlers", []) or []:
                visit(handler.body)

    visit(ast.parse(path.read_text()).body)
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_the_decider_packages_are_layered() -> None:
    packages = {p.name for p in (SERVICE / "domain").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(DOMAIN_LAYERS), f"a package of service/domain/ missing from DOMAIN_LAYERS: {packages}"
    rank = {name: i for i, name in enumerate(DOMAIN_LAYERS)}
    upward: list[str] = []
    checked = 0
    for module, path in MODULES.items():
        parts = module.split(".")
        if parts[:2] != ["service", "domain"] or len(parts) < 3:
            continue
        low = rank[parts[2]]
        for imported in _imports(path, runtime_only=False):
            other = imported.split(".")
            if other[:2] == ["service", "domain"] and len(other) > 2:
                checked += 1
                if rank[other[2]] > low:
                    upward.append(f"{module} imports {imported}")
    assert checked > 100, checked  # the walk saw the package's imports
    assert not upward, upward
    assert not any(p.suffix == ".py" and p.name != "__init__.py" for p in (SERVICE / "domain").iterdir()), \
        "every module of service/domain/ lives in a package by concern"


def test_the_service_layers_hold() -> None:
    wrong: list[str] = []
    for module, path in MODULES.items():
        banned = FORBIDDEN.get(_part(module), set())
        for imported in _imports(path, runtime_only=False):
            if _part(imported) in banned:
                wrong.append(f"{module} imports {imported}")
    assert not wrong, wrong


def test_no_import_cycle_at_run_time() -> None:
    graph = {module: _imports(path, runtime_only=True) - {module} for module, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(start: str) -> None:  # Tarjan's strongly connected components, iteratively
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    assert len(graph) > 100
    assert not cycles, cycles
