"""No import cycle inside planner/ or app/, counting every import: at the top, inside functions
(lazy) and under TYPE_CHECKING. A cycle is a knot the next change has to untie first. And no import
from a lower floor of the house into a higher one (FLOORS below)."""

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


# The house's floors, lowest first. A module imports from its own floor or one below, never from one
# above: the planner knows nothing of the app; the app's ground floor (its version, errors, folders,
# settings, native libraries, children's environment and caches) nothing of its rooms; the rooms
# (devices, engine, sources, rpc, speed, store, telemetry, planning, the session and the reply ...)
# nothing of a front end; the server (app/serve) nothing of the TUI, which can start it; the TUI nothing
# of the command line, which starts it. A pattern `x.*` is every
# module below x; the most specific pattern that matches a module names its floor.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the planner", ("planner", "planner.*")),
    (
        "the app's ground floor",
        ("app", "app.errors", "app.paths", "app.limits", "app.settings", "app.native", "app.children", "app.caches.*"),
    ),
    ("the app's rooms", ("app.*",)),
    ("the server", ("app.serve", "app.serve.*")),  # a front end over the rooms, which the TUI can start
    ("the TUI", ("app.tui", "app.tui.*")),
    ("the command line", ("app.cli", "app.cli.*", "app.__main__")),
)


def _floor(module: str, floors: tuple[tuple[str, tuple[str, ...]], ...] = FLOORS) -> int:
    best: tuple[int, int] | None = None  # (how specific, floor)
    for level, (_name, patterns) in enumerate(floors):
        for pattern in patterns:
            if pattern.endswith(".*"):
                base = pattern[:-2]
                matches, specific = module == base or module.startswith(base + "."), 2 * len(base)
            else:
                matches, specific = module == pattern, 2 * len(pattern) + 1
            if matches and (best is None or specific > best[0]):
                best = (specific, level)
    assert best is not None, f"{module} is on no floor: name it in FLOORS"
    return best[1]


def _upward(graph: dict[str, set[str]], floors: tuple[tuple[str, tuple[str, ...]], ...] = FLOORS) -> list[str]:
    """Every import from a lower floor into a higher one, in words."""
    out = []
    for module in sorted(graph):
        here = _floor(module, floors)
        for target in sorted(graph[module]):
            there = _floor(target, floors)
            if there > here:
                out.append(f"{module} ({floors[here][0]}) imports {target} ({floors[there][0]})")
    return out


def test_no_import_runs_from_a_lower_floor_to_a_higher_one() -> None:
    modules = {**_modules("planner"), **_modules("app")}
    known = set(modules)
    graph = {name: _imports(path, name, known) for name, path in modules.items()}
    assert _upward(graph) == []


def test_the_floor_check_finds_an_upward_import() -> None:
    graph = {"app.caches.plans": {"app.speed"}, "app.speed": {"app.caches.files"}, "app.caches.files": set()}
    assert _upward(graph) == ["app.caches.plans (the app's ground floor) imports app.speed (the app's rooms)"]
    assert _floor("app") == 1 and _floor("app.cli.plan") == 5 and _floor("planner.fit") == 0
    assert _floor("app.serve.api") == 3 < _floor("app.tui.app")
