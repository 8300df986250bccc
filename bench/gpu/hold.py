"""Another process's load on the GPU: hold memory until stdin closes, leaving `free` bytes free.

python bench/gpu/hold.py FREE_BYTES   (prints one JSON line once the memory is held)
"""

from __future__ import annotations

import json
import sys


def main(target_free: int) -> None:
    import torch

    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    blocks = []
    step = 1 << 30
    want = max(0, free - target_free)
    while want > 0:  # GiB blocks, then the rest: one huge cudaMalloc can fail where pieces fit
        n = min(step, want)
        blocks.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        want -= n
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    print(json.dumps({"held": sum(b.numel() for b in blocks), "free": free_after, "total": total}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main(int(sys.argv[1]))
