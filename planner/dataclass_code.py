"""The code of dataclasses' generated methods, kept between runs as Python keeps byte code.

`dataclasses` writes each class's `__init__`, `__repr__`, `__eq__` ... as source text and compiles that text
with `exec` every time the class is defined. The text is the same from run to run, and compiling it was 45%
of importing what `vramchat --plan` needs on Python 3.11 (83 classes, 404 methods: 262 of 558 million
instructions). `install()` gives the dataclasses module an `exec` of its own that compiles each text once
and keeps the code in a file beside planner's byte code, as Python keeps a module's: read at the start, written
at exit when something new was compiled, never written where byte code is not (`-B`,
PYTHONDONTWRITEBYTECODE). Every Python from 3.10 to 3.13 compiles dataclass methods through that one name.
A process that never imports dataclasses (a replayed plan) pays nothing: the module is given its `exec` as it is
imported, and the file is read at the first class.
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

FILE_LIMIT = 8 << 20  # a kept file that grows past this (texts of code since changed) starts again

_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_compiled = 0
_installed = False
_path: str | None = None  # the kept file, read at the first class (None: not yet, or nowhere to keep it)


def cache_file() -> str | None:
    """Where the code is kept: planner's `__pycache__` (under `sys.pycache_prefix` when one is set), named by
    the interpreter's cache tag; None for an interpreter without one."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    folder = os.path.dirname(os.path.abspath(__file__))
    if sys.pycache_prefix:
        pycache = os.path.join(sys.pycache_prefix, folder.lstrip(os.sep))
    else:
        pycache = os.path.join(folder, "__pycache__")
    return os.path.join(pycache, f"dataclass_code.{tag}.marshal")


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None, /) -> None:
    """`exec` for the dataclasses module: a text compiled before runs from its kept code."""
    global _compiled, _path
    if _path is not None:  # the first class: what earlier runs kept
        _codes.update(_read(_path))
        atexit.register(_save, _path)
        _path = None
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:
            code = _codes[source] = compile(source, "<string>", "exec")
            _compiled += 1
        _used.add(source)
        source = code
    builtins.exec(source, vars(sys.modules["dataclasses"]) if globals is None else globals, locals)


def install() -> None:
    """Route dataclasses' compiles through the kept code (once per process): now if dataclasses is imported,
    else as it is imported."""
    global _installed, _path
    if _installed:
        return
    _installed = True
    _path = cache_file()
    if _path is None:
        return
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


def _save(path: str) -> None:
    """Write what this run compiled beside what was kept (only this run's texts when that grew too large)."""
    if not _compiled or sys.dont_write_bytecode:
        return
    data = marshal.dumps(_codes)
    if len(data) > FILE_LIMIT:
        data = marshal.dumps({text: _codes[text] for text in _used})
    partial = f"{path}.{os.getpid()}.partial"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        from importlib.util import MAGIC_NUMBER

        with open(partial, "wb") as handle:
            handle.write(MAGIC_NUMBER + data)
        os.replace(partial, path)  # another process's file is whole or replaced whole
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)


def counts() -> tuple[int, int]:
    """(texts compiled in this process, texts whose code came from the kept file)."""
    return _compiled, len(_used) - _compiled
