"""A test-only cap on the engine process's data: VRAMCHAT_ENGINE_DATA_LIMIT_MIB.

A device that runs out of memory must be met for real in tests, but Mesa's software Vulkan driver
(lavapipe) does not enforce the 2 GiB heap it reports: every device allocation is the engine
process's own memory. Linux counts such memory (writable private mappings, since 4.7) against the
process's RLIMIT_DATA, so with this variable set the engine process caps its data at that many MiB
when it starts, and a device buffer past the cap fails in the driver (vkAllocateMemory:
VK_ERROR_OUT_OF_DEVICE_MEMORY) as on a full GPU. Every engine process the app starts (a retry
starts a new one) takes the cap from the environment. RLIMIT_AS would not do: it counts the large
address-space reservations of the driver's LLVM, which then aborts instead of failing an allocation;
read-only mappings (the model file) and reservations without access do not count against this one.
Unset, or elsewhere than Linux, nothing is capped.
"""

from __future__ import annotations

import os
import sys

ENV = "VRAMCHAT_ENGINE_DATA_LIMIT_MIB"
MiB = 1 << 20


def cap_from_environment() -> int | None:
    """Cap this process's data at the variable's MiB (the hard limit is left as it is); the cap in
    bytes, or None when the variable is unset, not a whole number, or not on Linux."""
    value = os.environ.get(ENV, "").strip()
    if not value.isdigit() or not sys.platform.startswith("linux"):
        return None
    import resource

    limit = int(value) * MiB
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return limit
