"""No import cycle inside planner/ or app/, counting every import: at the top, inside functions
(lazy) and under TYPE_CHECKING. A cycle is a knot the next change has to untie first."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / package).rglob("*.py")}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every module of `known` that `path` imports, wherever the import statement is. A package's
    own `__init__`, which Python runs before any of its submodules, counts only where a name it
    defines is imported from it."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
            # a submodule by its name, else a name the package (or module) `base` defines
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            if target in known and target != name:
                out.add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _graph(package: str) -> dict[str, set[str]]:
    modules = _modules(package)
    known = set(modules)
    graph = {name: _imports(path, name, known) for name, path in modules.items()}
    # a package's __init__ importing its own submodules is how a package is put together, not a knot
    for name in graph:
        graph[name] = {m for m in graph[name] if not (m.startswith(name + ".") and (ROOT / package).exists())}
    return graph


def test_the_planner_has_no_import_cycle() -> None:
    assert _cycles(_graph("planner")) == []


def test_the_app_has_no_import_cycle() -> None:
    assert _cycles(_graph("app")) == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_devices_do_not_reach_up_into_the_engine() -> None:
    """app/devices is read by the engine, the session and the screens, never the other way round (not
    even for a type: learned_overhead describes the load report it reads as a Protocol)."""
    above = ("app.engine", "app.session", "app.tui")
    up = sorted(
        f"{name} -> {target}"
        for name, targets in _graph("app").items()
        if name == "app.devices" or name.startswith("app.devices.")
        for target in targets
        if target.startswith(above)
    )
    assert up == []
