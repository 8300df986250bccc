"""Run in a child process by test_load_retry_real.py: a real llama.cpp load that runs out of memory.

The child caps its own address space (RLIMIT_AS) so that llama.cpp cannot allocate the
KV cache the first plan asks for, then loads through the app's session, which must
retry with the planner's smaller plan. It prints one JSON line with what happened.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.devices import probe_devices  # noqa: E402
from app.engine.engine import Engine  # noqa: E402
from app.session import LoadFailed, ModelSession  # noqa: E402
from planner.anatomy import load_anatomy  # noqa: E402
from planner.config import LoadConfig  # noqa: E402
from planner.fit import Wishes, solve  # noqa: E402
from planner.gguf import read_gguf  # noqa: E402

MiB = 1 << 20


def address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def main(model: str, n_ctx: int, headroom_mib: int) -> None:
    devices = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(model))
    fit = solve(anatomy, [], devices.host, Wishes(n_ctx=n_ctx, kv_types=("f16",), flash_attn="on"))
    engine = Engine()
    engine.load(model, LoadConfig(n_gpu_layers=0, n_ctx=512, flash_attn=True))  # llama.cpp's threads and pools
    engine.unload()
    limit = address_space() + headroom_mib * MiB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    retries: list[dict[str, object]] = []
    # the whole context at load (that is what runs out), and no dry run first: it would map the model
    # again inside the address-space cap this test sets
    session = ModelSession(lambda: engine, elastic=False, verify=False)
    out: dict[str, object] = {"planned_ctx": fit.plan.resolved.n_ctx, "planned_kv": fit.plan.kv_bytes}
    try:
        loaded = session.load(
            model, anatomy, fit, devices, on_retry=lambda r, why: retries.append({"why": why, "changes": r.changes})
        )
        out.update(
            loaded=True,
            n_ctx=loaded.n_ctx,
            kv=sum(loaded.report.measurements.kv.values()),
            planned_kv_after=loaded.plan.kv_bytes,
            changes=loaded.changes,
        )
        reply = "".join(engine.generate(engine.tokenize("Hello"), None))
        out["generated"] = len(reply) >= 0
    except LoadFailed as exc:
        out.update(loaded=False, error=str(exc))
    out["retries"] = retries
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
