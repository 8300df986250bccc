"""A test-only cap on the engine process's data while llama.cpp allocates buffers: VRAMCHAT_ENGINE_DATA_LIMIT_MIB.

A device that runs out of memory must be met for real in tests, but Mesa's software Vulkan driver
(lavapipe) does not enforce the 2 GiB heap it reports: every device allocation is the engine
process's own memory. Linux counts such memory (writable private mappings, since 4.7) against the
process's RLIMIT_DATA, so with this variable set the engine process caps its data at that many MiB
while llama.cpp allocates a load's buffers (the model's, the caches', the compute reserve) and a
resized context's, and a device buffer past the cap fails in the driver (vkAllocateMemory:
VK_ERROR_OUT_OF_DEVICE_MEMORY) as on a full GPU. Between allocations the limit is the process's own
again: a reply's work (the driver compiling its shaders, LLVM's and each thread's memory) is host
memory a GPU's heap never holds, and how much it takes differs from machine to machine (a cold
shader cache, more cores), which a cap on the whole process turned into a std::bad_alloc mid-prompt.
RLIMIT_AS would not do: it counts the large address-space reservations of the driver's LLVM, which
then aborts instead of failing an allocation; read-only mappings (the model file) and reservations
without access do not count against this one. Unset, or elsewhere than Linux, nothing is capped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

ENV = "VRAMCHAT_ENGINE_DATA_LIMIT_MIB"
MiB = 1 << 20


def cap_from_environment() -> int | None:
    """The cap the variable asks for, in bytes (no more than the hard limit), or None when the variable is
    unset, not a whole number, or not on Linux."""
    value = os.environ.get(ENV, "").strip()
    if not value.isdigit() or not sys.platform.startswith("linux"):
        return None
    import resource

    limit = int(value) * MiB
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    return min(limit, hard) if hard != resource.RLIM_INFINITY else limit


@contextlib.contextmanager
def capped() -> Iterator[int | None]:
    """Cap this process's data (the soft limit; the hard one is left as it is) while the block allocates
    buffers, and put the limit it had back after; yields the cap in bytes, or None when nothing is capped."""
    cap = cap_from_environment()
    if cap is None:
        yield None
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
