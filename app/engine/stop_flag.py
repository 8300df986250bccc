"""A stop request that llama.cpp can poll without calling into Python.

ggml-cpu asks the context's abort callback after every node of every graph (ggml-cpu.c,
`ggml_graph_compute_thread`: thread 0, before each barrier). A Python callback there costs each
node a trip through the interpreter and its lock while the other thread waits at the barrier:
measured on the 2-core EPYC, a tiny model's token took 95 us with one against 81 without, the
demo's 11.25 ms against 10.80 (bench/abort_check.py).

The question the callback answers is "has a stop been asked?", a byte. The C library's `strlen`
answers it in C when given a string that is empty until a stop is asked: 0 (go on) or 1 (stop),
and a 0 or a 1 in the return register is the C `bool` ggml expects on every ABI llama.cpp runs
on. Where no C library can be found, the Python callback does the same job, slower.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any


def _c_strlen() -> Any | None:
    """The C library's strlen, or None where there is none to be found."""
    try:
        library = ctypes.cdll.msvcrt if sys.platform == "win32" else ctypes.CDLL(None)
        return library.strlen
    except (OSError, AttributeError, TypeError):
        return None


class StopFlag:
    """threading.Event's set/clear/is_set, readable by llama.cpp as an abort callback (`install`)."""

    def __init__(self) -> None:
        self._text = ctypes.create_string_buffer(2)  # b"" until a stop is asked, then b"x"
        self._event = threading.Event()
        self._callback: Any = None  # kept alive as long as llama.cpp may call it
        self._data: Any = None
        self._in_c = False

    def set(self) -> None:
        self._text[0] = b"x"
        self._event.set()

    def clear(self) -> None:
        self._text[0] = b"\0"
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def abort_callback(self) -> tuple[Any, Any, bool]:
        """llama.cpp's abort callback and its data for this flag, and whether it runs in C (no Python)."""
        import llama_cpp

        if self._callback is None:
            strlen = _c_strlen()
            if strlen is not None:
                self._callback = ctypes.cast(strlen, llama_cpp.ggml_abort_callback)
                self._data, self._in_c = ctypes.cast(self._text, ctypes.c_void_p), True
            else:
                self._callback = llama_cpp.ggml_abort_callback(lambda _data: self._event.is_set())
                self._data, self._in_c = ctypes.c_void_p(0), False
        return self._callback, self._data, self._in_c

    def install(self, ctx: Any) -> None:
        """Make this flag the abort callback of llama.cpp's context `ctx`."""
        import llama_cpp

        callback, data, _ = self.abort_callback()
        llama_cpp.llama_set_abort_callback(ctx, callback, data)
