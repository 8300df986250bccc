"""What an RPC server may claim before vramchat believes it.

Any program can listen on a port and answer the RPC protocol; a plan built on its figures is only
as good as they are. So the device count and each device's memory are checked against what a
llama.cpp server can send: ggml's scheduler takes at most 16 backends (GGML_SCHED_MAX_BACKENDS in
the pinned ggml-backend.cpp, the same 16 as GGML_RPC_MAX_SERVERS), and no device holds more than
MAX_DEVICE_MEMORY. Each check gives the reason in words, or None.
"""

from __future__ import annotations

MAX_DEVICES_PER_SERVER = 16
TiB = 1024**4
MAX_DEVICE_MEMORY = 64 * TiB  # far above any GPU, and above the RAM of any machine a CPU server lends


def _tib(n: int) -> str:
    return f"{n / TiB:,.0f} TiB" if n >= TiB else f"{n:,} bytes"


def device_count_problem(count: int) -> str | None:
    if count > MAX_DEVICES_PER_SERVER:
        return (
            f"it claims {count:,} devices, and llama.cpp's RPC server lends at most {MAX_DEVICES_PER_SERVER}: "
            "not believed (is it a llama.cpp RPC server?)"
        )
    return None


def device_memory_problem(index: int, free: int, total: int) -> str | None:
    if total > MAX_DEVICE_MEMORY:
        return (
            f"its device {index} claims {_tib(total)} of memory ({total:,} bytes), more than the "
            f"{_tib(MAX_DEVICE_MEMORY)} any device has: not believed (is it a llama.cpp RPC server?)"
        )
    if free > total:
        return (
            f"its device {index} claims {free:,} bytes free of {total:,} in all: free memory cannot exceed "
            "the total, so its figures are not believed"
        )
    return None
