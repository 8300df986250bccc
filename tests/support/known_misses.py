"""The buffers the planner is known to miss today, each named with its exact error: the one list.

The accuracy tests hold every buffer of every configuration to `error == 0` (tests.support.compare.misses),
except the entries here, which must miss by exactly their recorded bytes: a miss that grows, shrinks or
moves fails its test as any other would, and one that is fixed fails too, saying to delete its entry.
Whoever fixes one deletes its line; nothing else is hidden in a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.compare import ConfigRow


@dataclass(frozen=True, eq=False)
class KnownMiss:
    model: str  # the model file's name, as the tests write it: "qwen2moe.gguf"
    device: str  # "CPU", "Vulkan0", "RPC1" ...
    kind: str  # weights, kv, kv_swa, recurrent, output, compute
    error: int  # planned minus allocated, in bytes
    why: str  # what llama.cpp does that the planner does not (yet)
    where: dict[str, Any] = field(default_factory=dict)  # the settings of the configurations it is seen in

    def covers(self, row: ConfigRow, device: str, kind: str) -> bool:
        return (
            row.model == self.model
            and (device, kind) == (self.device, self.kind)
            and all(row.config.get(key) == value for key, value in self.where.items())
        )


# none today: the RPC and Vulkan compute misses the 4 MiB band hid (issue 56) were made exact in ec45262. An entry:
# KnownMiss("gemma3.gguf", "Vulkan0", "compute", -774_144, "why", {"n_gpu_layers": 99, "n_ctx": 512})
KNOWN_MISSES: tuple[KnownMiss, ...] = ()
