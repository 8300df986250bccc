"""llama.cpp's log, captured: the real buffer sizes it reports, and its last words on failure.

llama.cpp has one process-wide log callback. `LogCapture.install()` points it
at a collector that keeps the recent lines and parses every "<name> <kind>
buffer size = X MiB" line into `Measurements`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import threading
from collections import deque
from dataclasses import dataclass, field

_BUFFER_LINE = re.compile(
    r"^\s*(?P<func>\w+):\s+(?P<name>\S+)\s+(?P<what>model|KV|RS|output|compute) buffer size\s*=\s*"
    r"(?P<mib>[0-9.]+) MiB"
)
_CACHE_LINE = re.compile(r"creating\s+(?P<non>non-)?SWA KV cache")
_MiB = 1024 * 1024
# llama.cpp logs buffer sizes in MiB with two decimals: each figure is within half a hundredth
LOG_ROUNDING = (_MiB + 199) // 200


@dataclass
class Measurements:
    """Buffer sizes llama.cpp reported for one load (to within 0.01 MiB: its log's precision)."""

    model: dict[str, int] = field(default_factory=dict)  # CPU_Mapped, CUDA0, CPU_REPACK ...
    kv: dict[str, int] = field(default_factory=dict)  # per buffer name (both caches summed)
    kv_swa: dict[str, int] = field(default_factory=dict)
    recurrent: dict[str, int] = field(default_factory=dict)
    output: dict[str, int] = field(default_factory=dict)
    compute: dict[str, int] = field(default_factory=dict)
    # the vision projector's buffers (libmtmd, app.engine.multimodal): its weights once an image ran through
    # them, its compute buffer as clip's warmup logged it, then exactly after each image
    projector_weights: dict[str, int] = field(default_factory=dict)
    projector_compute: dict[str, int] = field(default_factory=dict)

    def total(self) -> int:
        return sum(sum(d.values()) for _, d in self.tables())

    def tables(self) -> list[tuple[str, dict[str, int]]]:
        """(kind, sizes per buffer name) in the planner's words: weights, kv, kv_swa, recurrent, output, compute,
        projector_weights, projector_compute."""
        return [
            ("weights", self.model),
            ("kv", self.kv),
            ("kv_swa", self.kv_swa),
            ("recurrent", self.recurrent),
            ("output", self.output),
            ("compute", self.compute),
            ("projector_weights", self.projector_weights),
            ("projector_compute", self.projector_compute),
        ]

    def by_kind(self) -> dict[str, int]:
        return {
            "weights": sum(self.model.values()),
            "kv": sum(self.kv.values()) + sum(self.kv_swa.values()),
            "recurrent": sum(self.recurrent.values()),
            "output": sum(self.output.values()),
            "compute": sum(self.compute.values()),
            "projector_weights": sum(self.projector_weights.values()),
            "projector_compute": sum(self.projector_compute.values()),
        }


class LogCapture:
    """Collects llama.cpp log lines; one instance serves the process."""

    def __init__(self, keep: int = 400) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.measurements = Measurements()
        self._lock = threading.Lock()
        self._cache = "base"
        self._callback = None  # keeps the ctypes callback alive
        self._partial = ""
        # a file descriptor every line is also written to, unbuffered (the engine process's stderr,
        # so that the app reads llama.cpp's last words when a crash ends the process)
        self.echo_fd: int | None = None
        # every line that tells a size, since the last reset (the ring above drops them on a long load)
        self.size_lines: list[str] = []

    def reset(self) -> None:
        with self._lock:
            self.measurements = Measurements()
            self.lines.clear()
            self.size_lines = []
            self._cache = "base"

    def feed(self, line: str) -> None:
        if self.echo_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.echo_fd, (line.rstrip("\n") + "\n").encode("utf-8", errors="replace"))
        with self._lock:
            self.lines.append(line.rstrip("\n"))
            if "size =" in line or "SWA KV cache" in line:
                self.size_lines.append(line.rstrip("\n"))
            cache = _CACHE_LINE.search(line)
            if cache:  # the buffer lines that follow belong to this cache
                self._cache = "base" if cache["non"] else "swa"
            match = _BUFFER_LINE.match(line)
            if not match:
                return
            name, what, size = match["name"], match["what"], round(float(match["mib"]) * _MiB)
            m = self.measurements
            target = {"model": m.model, "RS": m.recurrent, "output": m.output, "compute": m.compute}.get(what)
            if what == "KV":
                target = m.kv_swa if self._cache == "swa" else m.kv
            assert target is not None
            target[name] = target.get(name, 0) + size

    def errors(self) -> list[str]:
        with self._lock:
            return [line for line in self.lines if "error" in line.lower() or "failed" in line.lower()]

    def tail(self, n: int = 20) -> list[str]:
        with self._lock:
            return list(self.lines)[-n:]

    def callback(self):  # -> llama_cpp.llama_log_callback (a ctypes function, kept alive by this capture)
        """The C log callback that feeds this capture (llama.cpp's, or libmtmd's: `app.engine.multimodal`)."""
        import llama_cpp

        def callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            piece = text.decode("utf-8", errors="replace") if text else ""
            self._partial += piece
            if "\n" in self._partial:
                *complete, self._partial = self._partial.split("\n")
                for line in complete:
                    self.feed(line)

        if self._callback is None:
            self._callback = llama_cpp.llama_log_callback(callback)
        return self._callback

    def install(self) -> None:
        import llama_cpp

        llama_cpp.llama_log_set(self.callback(), ctypes.c_void_p(0))


_CAPTURE: LogCapture | None = None


def capture() -> LogCapture:
    """The process-wide capture, installed on first use."""
    global _CAPTURE
    if _CAPTURE is None:
        _CAPTURE = LogCapture()
        _CAPTURE.install()
    return _CAPTURE
