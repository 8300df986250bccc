"""How long a reply may go without a word from the engine before it counts as stalled.

While it reads a prompt the engine sends a message per batch, while it writes one per token; a
process that was stopped (SIGSTOP), a hung driver or an RPC server that went quiet sends nothing, and
without a limit the reply would wait forever. The limit scales with the plan's predicted speed, so a
large model on a slow CPU (a batch of 512 tokens may take a minute) is never taken for a hung one.
"""

from __future__ import annotations

import os

FLOOR_SECONDS = 60.0  # never less: a first reply may compile GPU pipelines (Vulkan on lavapipe: ~12 s)
UNKNOWN_SECONDS = 300.0  # when the plan's speed is unknown
STEP_MARGIN = 20  # a step may take this many times its predicted time
ENV = "VRAMCHAT_STALL_SECONDS"  # a fixed limit (for tests, or a machine slower than predicted)


def stall_limit(decode_tps: float | None, prefill_tps: float | None, n_batch: int) -> float:
    """Seconds without a message from the engine after which a reply is stalled."""
    fixed = os.environ.get(ENV, "")
    if fixed:
        try:
            return max(float(fixed), 0.1)
        except ValueError:
            pass
    if not decode_tps or not prefill_tps:
        return UNKNOWN_SECONDS
    step = max(1.0 / decode_tps, n_batch / prefill_tps)
    return max(FLOOR_SECONDS, STEP_MARGIN * step)
