"""When the engine process dies: what happened, in words, and what the evidence points to.

The process can end by a signal (a segmentation fault in a kernel, an abort from a
GGML_ASSERT or a CUDA error, the kernel's OOM killer), by a non-zero exit, or by
being killed from outside. The app keeps the conversation either way; this module
turns the exit status, the phase the engine was in and llama.cpp's last log lines
into one message and into the two hints the app acts on: memory (reload with a
smaller plan) and a CPU extra buffer type (reload without extra buffer types).
"""

from __future__ import annotations

import contextlib
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

from app.engine.types import EngineError

PHASES = {
    "starting": "while starting",
    "loading": "while loading the model",
    "prefill": "while reading the prompt",
    "decode": "while writing the reply",
    "tokenize": "while tokenizing",
    "dry_run": "during the dry run",
    "idle": "while idle",
    "slots": "between parallel replies",
}

_SIGNAL_WORDS = {
    "SIGSEGV": "a segmentation fault",
    "SIGABRT": "an abort",
    "SIGILL": "an illegal instruction",
    "SIGBUS": "a bus error",
    "SIGFPE": "an arithmetic error",
    "SIGKILL": "killed",
    "SIGTERM": "terminated",
}
_CRASH_SIGNALS = ("SIGSEGV", "SIGILL", "SIGBUS", "SIGABRT", "SIGFPE")
_MEMORY_WORDS = (
    "out of memory",
    "cudamalloc failed",
    "hipmalloc failed",
    "failed to allocate",
    "bad_alloc",
    "erroroutofdevicememory",
    "cuda error: out of memory",
    "std::bad_alloc",
    "memoryerror",
)
# CPU extra buffer types and the sources of their kernels, as they show in an assert or a stack
_EXTRA_BUFFER_WORDS = re.compile(r"\b(amx|repack|kleidiai|cpu_repack)\b|ggml-cpu/(amx|repack|kleidiai)", re.I)
# what a crash's last words look like: assertions and errors first, then anything
_NOTEWORTHY = re.compile(r"GGML_ASSERT|GGML_ABORT|\berror\b|\bfatal\b|\bfailed\b|\babort(ed)?\b|exception", re.I)
# ggml-rpc's abort when a server closed the connection or stopped answering (RPC_STATUS_ASSERT)
_RPC_WORDS = re.compile(r"Remote RPC server crashed|ggml-rpc\.cpp|\b(recv|send) failed \(bytes_")
# Python's faulthandler dump that follows a native crash: the Python stack, not llama.cpp's words
_FAULTHANDLER = "Fatal Python error:"


def oom_kills() -> int:
    """The kernel's count of processes its OOM killer ended (cgroup first, then the whole machine);
    -1 when neither can be read. Compared before and after a death, it tells an OOM kill."""
    for path, key in ((Path("/sys/fs/cgroup/memory.events"), "oom_kill"), (Path("/proc/vmstat"), "oom_kill")):
        with contextlib.suppress(OSError, ValueError):
            for line in path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    return -1


@dataclass(frozen=True)
class EngineExit:
    """How the engine process ended, and where it was."""

    returncode: int
    phase: str
    last_lines: tuple[str, ...] = ()
    oom_killed: bool = False  # the OOM killer's count moved while the engine ran
    extra_buffers: tuple[str, ...] = field(default_factory=tuple)  # CPU extra buffer types the load used
    stalled_seconds: float = 0.0  # ended by the app after this long without a token or progress
    stalled_on_rpc: bool = False  # ... while the model used RPC servers (the likeliest cause: one went quiet)
    stop_ignored: float = 0.0  # ended by the app: it had not stopped this long after being asked to

    @property
    def signal_name(self) -> str:
        if self.returncode >= 0:
            return ""
        with contextlib.suppress(ValueError):
            return signal.Signals(-self.returncode).name
        return f"signal {-self.returncode}"

    @property
    def how(self) -> str:
        if self.stalled_seconds and self.stalled_on_rpc:
            return f"was stopped after {self.stalled_seconds:.0f} s without a token from the RPC servers"
        if self.stalled_seconds:
            return (
                f"was ended by vramchat after {self.stalled_seconds:.0f} s without a token or any progress "
                "(the process was stopped or hung: a hung GPU driver looks like this)"
            )
        if self.stop_ignored:
            return f"was ended by vramchat: it had not stopped {self.stop_ignored:.0f} s after being asked to"
        name = self.signal_name
        if not name:
            return f"exited with status {self.returncode}"
        words = _SIGNAL_WORDS.get(name)
        if name == "SIGKILL":
            return (
                "was killed by the kernel's out-of-memory killer (SIGKILL)"
                if self.oom_killed
                else "was killed (SIGKILL)"
            )
        return f"crashed with {words} ({name})" if words else f"ended by {name}"

    @property
    def memory(self) -> bool:
        """The evidence points to memory: the OOM killer, or an allocation that failed in its last words."""
        text = "\n".join(self.last_lines).lower()
        return self.oom_killed or any(word in text for word in _MEMORY_WORDS)

    @property
    def cpu_extra_buffer(self) -> bool:
        """The evidence points to a CPU extra buffer type: a crash in compute whose last words name one
        (an assert in ggml-cpu/amx or repack, say), while the load used one."""
        if not self.extra_buffers or self.signal_name not in _CRASH_SIGNALS:
            return False
        if self.phase not in ("prefill", "decode", "loading"):
            return False
        return any(_EXTRA_BUFFER_WORDS.search(line) for line in self.last_lines[-30:])

    @property
    def rpc_failure(self) -> bool:
        """The evidence points to a lost RPC server: ggml-rpc aborts when a server stops answering."""
        return (bool(self.stalled_seconds) and self.stalled_on_rpc) or any(
            _RPC_WORDS.search(line) for line in self.last_lines[-40:]
        )

    def last_words(self, n: int = 3) -> list[str]:
        """llama.cpp's last noteworthy lines (asserts and errors first), else its last lines."""
        lines = [line.strip() for line in self.last_lines if line.strip()]
        dump = next((i for i, line in enumerate(lines) if line.startswith(_FAULTHANDLER)), len(lines))
        lines = lines[:dump]
        noteworthy = [line for line in lines if _NOTEWORTHY.search(line)]
        return (noteworthy or lines)[-n:]

    def message(self) -> str:
        text = f"llama.cpp's engine process {self.how} {PHASES.get(self.phase, 'while ' + self.phase)}."
        words = [] if (self.stalled_seconds or self.stop_ignored) else self.last_words()  # its startup lines
        if words:
            text += " Its last words: " + " | ".join(words)
        return text


class EngineCrashed(EngineError):
    """The engine process died; `exit` says how. The app's own process is unharmed."""

    title = "The engine stopped"

    def __init__(self, exit_: EngineExit) -> None:
        super().__init__(exit_.message(), list(exit_.last_lines[-20:]))
        self.exit = exit_
