"""The code of dataclasses' generated methods, kept between runs as Python keeps byte code.

`dataclasses` writes each class's `__init__`, `__repr__`, `__eq__` ... as source text and compiles that text
with `exec` every time the class is defined. The text is the same from run to run, and compiling it was 45%
of importing what `vramchat --plan` needs on Python 3.11 (83 classes, 404 methods: 262 of 558 million
instructions). `install()` gives the dataclasses module an `exec` of its own that compiles each text once and
keeps the code, one file per module that defines dataclasses, beside planner's byte code, as Python keeps a
module's: a module's file is read at its first class, written at exit when something new was compiled, and
never written where byte code is not (`-B`, PYTHONDONTWRITEBYTECODE). Every Python from 3.10 to 3.13 compiles
dataclass methods through that one name. A process that never imports dataclasses (a replayed plan) pays
nothing: the module is given its `exec` as it is imported.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import marshal
import os
import sys
from types import CodeType, ModuleType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replayed plan may not need it)
if TYPE_CHECKING:
    from typing import Any

FILE_LIMIT = 1 << 20  # a module's file that grows past this (texts of code since changed) starts again

_codes: dict[str, dict[str, CodeType]] = {}  # module -> text -> code
_used: dict[str, set[str]] = {}  # module -> the texts this process defined
_changed: set[str] = set()  # modules with code compiled in this process
_compiled = 0
_installed = False
_folder: str | None = None  # where the files are; None: nowhere (not installed, or no cache tag)


def cache_folder() -> str | None:
    """Where the code is kept: a folder in planner's `__pycache__` (under `sys.pycache_prefix` when one is set),
    named by the interpreter's cache tag; None for an interpreter without one."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    folder = os.path.dirname(os.path.abspath(__file__))
    if sys.pycache_prefix:
        pycache = os.path.join(sys.pycache_prefix, folder.lstrip(os.sep))
    else:
        pycache = os.path.join(folder, "__pycache__")
    return os.path.join(pycache, f"dataclass_code.{tag}")


def _file(module: str) -> str | None:
    if _folder is None or not module or not all(c.isalnum() or c in "._" for c in module):
        return None
    return os.path.join(_folder, f"{module}.marshal")


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None, /) -> None:
    """`exec` for the dataclasses module: a text compiled before runs from its kept code."""
    global _compiled
    if globals is None:
        globals = vars(sys.modules["dataclasses"])
    if isinstance(source, str):
        module = str(globals.get("__name__", ""))
        codes = _codes.get(module)
        if codes is None:  # the module's first class: what earlier runs kept
            path = _file(module)
            codes = _codes[module] = _read(path) if path else {}
        code = codes.get(source)
        if code is None:
            # dont_inherit: compiled as dataclasses' own exec compiles it, without this module's
            # `from __future__ import annotations` (which would turn __init__'s annotations into strings)
            code = codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _compiled += 1
            _changed.add(module)
        _used.setdefault(module, set()).add(source)
        source = code
    builtins.exec(source, globals, locals)


def install() -> None:
    """Route dataclasses' compiles through the kept code (once per process): now if dataclasses is imported,
    else as it is imported."""
    global _installed, _folder
    if _installed:
        return
    _installed = True
    _folder = cache_folder()
    if _folder is None:
        return
    atexit.register(_save)
    if "dataclasses" in sys.modules:
        _give_exec(sys.modules["dataclasses"])
    else:
        sys.meta_path.insert(0, _OnImport())


def _give_exec(module: ModuleType) -> None:
    setattr(module, "exec", _exec)  # noqa: B010 (the module's global, which shadows the builtin)


class _OnImport:
    """A meta path finder for one module, dataclasses: its own loader runs it, then it is given `_exec`."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "dataclasses":
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec  # not a module found on the path: left as it is
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _give_exec(module)

        loader.exec_module = exec_module
        return spec


def _read(path: str) -> dict[str, CodeType]:
    """The kept code, or nothing where the file is missing, written by another Python, or damaged."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        from importlib.util import MAGIC_NUMBER as magic

        if not data.startswith(magic):
            return {}
        kept = marshal.loads(data[len(magic) :])
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {text: code for text, code in kept.items() if isinstance(text, str) and isinstance(code, CodeType)}


def _save() -> None:
    """Write each module's file where this run compiled something for it: what was kept and what is new (only
    this run's texts when that grew too large)."""
    if not _compiled or sys.dont_write_bytecode:
        return
    from importlib.util import MAGIC_NUMBER

    for module in _changed:
        path = _file(module)
        if path is None:
            continue
        codes = _codes[module]
        data = marshal.dumps(codes)
        if len(data) > FILE_LIMIT:
            data = marshal.dumps({text: codes[text] for text in _used.get(module, ())})
        partial = f"{path}.{os.getpid()}.partial"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(partial, "wb") as handle:
                handle.write(MAGIC_NUMBER + data)
            os.replace(partial, path)  # another process's file is whole or replaced whole
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(partial)


def counts() -> tuple[int, int]:
    """(texts compiled in this process, texts whose code came from the kept files)."""
    return _compiled, sum(len(texts) for texts in _used.values()) - _compiled
