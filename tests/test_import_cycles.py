"""No import cycle inside planner/ or app/, counting every import: at the top, inside functions
(lazy) and under TYPE_CHECKING. A cycle is a knot the next change has to untie first. And no import
from a lower floor of the house into a higher one (FLOORS below)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
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


# The house's floors, lowest first: a floor per room (a folder of app/ that holds one idea) and per
# small group of loose modules that belong together. A module imports from its own floor or one below,
# never from one above, so an arrow between two rooms runs one way only. The planner knows nothing of
# the app; the ground floor (the version, errors, folders, limits, settings, native libraries, the
# children's environment, the text made safe for the terminal, the words for memory, the caches)
# nothing of a room; each room only the rooms below it; the server (app/serve) nothing of the TUI,
# which can start it; the TUI nothing of the command line, which starts it. Inside the TUI, its parts
# (messages, services) sit under the widgets, the widgets under the screens that hold them, the
# screens under the app that pushes them. A pattern `x.*` is x and every module below it; the most
# specific pattern that matches a module names its floor. No pattern takes in all of app/: a new room
# or loose module is placed here by whoever adds it.
Floors = tuple[tuple[str, tuple[str, ...]], ...]
FLOORS: Floors = (
    ("the planner", ("planner.*",)),
    (
        "the ground floor",
        (
            "app",
            "app.errors",
            "app.paths",
            "app.limits",
            "app.settings",
            "app.native",
            "app.children",
            "app.collector",
            "app.terminal_text",
            "app.memory_words",
            "app.caches.*",
        ),
    ),
    ("the RPC servers", ("app.rpc.*",)),  # asked in Python, given to llama.cpp, served in a child
    ("the devices", ("app.devices.*",)),  # asks the RPC servers what they lend
    ("the engine", ("app.engine.*",)),  # llama.cpp in a process of its own, on the devices
    ("where models come from", ("app.sources.*",)),
    ("models on this machine", ("app.discovery", "app.ollama", "app.vision", "app.demo")),
    ("the speed", ("app.speed.*",)),  # this machine's figures: the devices and the engine timed
    ("the telemetry", ("app.telemetry.*",)),
    ("a message's attachments", ("app.attachments",)),
    (
        "the plans",
        (
            "app.planning",
            "app.elastic_context",
            "app.quants",
            "app.model_summary",
            "app.catalog",
            "app.catalog_workers",
            "app.estimate_check",
        ),
    ),
    # The conversation's room stands on two floors. Its words (the chat formats, how a reply ended and
    # what that calls for, thoughts told from the answer, sampling) are spoken by the session, the store
    # and the server, below them; its work (the prompt from a stored chat, a reply written through the
    # session into the store) above them. A new module of the room is on the upper floor unless named.
    (
        "the conversation's words",
        (
            "app.conversation",
            "app.conversation.templates",
            "app.conversation.template_child",
            "app.conversation.template_errors",
            "app.conversation.template_sandbox",
            "app.conversation.outcome",
            "app.conversation.recovery",
            "app.conversation.reasoning",
            "app.conversation.sampling",
        ),
    ),
    ("the session", ("app.session",)),  # the loaded model: plans, the engine, its recovery
    ("the store", ("app.store.*",)),  # chats kept in SQLite, with the session's receipts
    ("the conversation", ("app.conversation.*",)),
    ("the server", ("app.serve.*",)),  # a front end over the rooms, which the TUI can start
    ("the TUI's parts", ("app.tui.*",)),  # messages, services, what the screens and widgets share
    ("the TUI's widgets", ("app.tui.widgets.*",)),
    ("the TUI's screens", ("app.tui.screens.*",)),
    ("the TUI", ("app.tui", "app.tui.app")),
    ("the command line", ("app.cli.*", "app.__main__")),
)


def _floor(module: str, floors: Floors = FLOORS) -> int:
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


def _floor_name(module: str, floors: Floors = FLOORS) -> str:
    return floors[_floor(module, floors)][0]


def _upward(graph: dict[str, set[str]], floors: Floors = FLOORS) -> list[tuple[str, str]]:
    """Every import from a lower floor into a higher one, as (importer, imported)."""
    return [
        (module, target)
        for module in sorted(graph)
        for target in sorted(graph[module])
        if _floor(target, floors) > _floor(module, floors)
    ]


def _in_words(arrows: Iterable[tuple[str, str]], floors: Floors = FLOORS) -> list[str]:
    return [f"{a} ({_floor_name(a, floors)}) imports {b} ({_floor_name(b, floors)})" for a, b in sorted(arrows)]


def _house() -> dict[str, set[str]]:
    modules = {**_modules("planner"), **_modules("app")}
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def test_no_import_runs_from_a_lower_floor_to_a_higher_one() -> None:
    """A widget that wants a dialog asks for it with a message (app/tui/dialog_asks.py), never by
    importing the screen; a room that needs a piece of a room above it gets the piece moved down to
    the room that owns it, or is handed a callback."""
    assert _in_words(_upward(_house())) == []


def _placed(module: str) -> bool:
    try:
        _floor(module)
    except AssertionError:
        return False
    return True


def test_every_module_is_on_a_floor_every_floor_holds_one_and_every_name_is_one() -> None:
    """A module on no floor (a new room or loose module) is placed in FLOORS by whoever adds it; a floor
    whose modules have all moved, or a name in FLOORS that is no module (renamed, moved), is a floor plan
    that no longer describes the house."""
    modules = set(_house())
    assert sorted(m for m in modules if not _placed(m)) == [], "on no floor: name them in FLOORS"
    named = [p for _name, patterns in FLOORS for p in patterns if not p.endswith(".*")]
    assert sorted(p for p in named if p not in modules) == []
    assert [name for level, (name, _p) in enumerate(FLOORS) if not any(_floor(m) == level for m in modules)] == []


def test_the_floor_check_finds_an_upward_import() -> None:
    graph = {"app.caches.plans": {"app.speed"}, "app.speed": {"app.caches.files"}, "app.caches.files": set()}
    assert _upward(graph) == [("app.caches.plans", "app.speed")]
    assert _in_words(_upward(graph)) == ["app.caches.plans (the ground floor) imports app.speed (the speed)"]
    # a room above another: the arrow up between two rooms is seen, the arrow down is not
    graph = {"app.devices.bandwidth": {"app.speed.machine"}, "app.speed.machine": {"app.devices.ggml"}}
    assert _upward(graph) == [("app.devices.bandwidth", "app.speed.machine")]
    assert _floor_name("app") == "the ground floor" and _floor_name("planner.fit") == "the planner"
    assert (
        _floor_name("app.cli.plan") == "the command line" and _floor_name("app.tui.screens.chat") == "the TUI's screens"
    )
    assert _floor("app.rpc.wire") < _floor("app.devices.ggml") < _floor("app.engine.child") < _floor("app.speed")
    # the conversation's words under the session and the store, its work (a new module too) above them
    assert _floor("app.conversation.outcome") < _floor("app.session") < _floor("app.store")
    assert _floor("app.store.export") < _floor("app.conversation.reply") == _floor("app.conversation.new_module")
    assert _floor("app.tui.widgets.chat.past_chats") < _floor("app.tui.screens.receipt") < _floor("app.tui.app")
    assert _floor("app.serve.api") < _floor("app.tui.app") < _floor("app.cli")
