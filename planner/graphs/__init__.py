"""Model graphs, one builder per llama.cpp architecture family."""

from __future__ import annotations

from collections.abc import Callable

from planner.graphs import deepseek2, dense, gpt_oss, granite, hybrid, mamba, qwen3next, rwkv, ssm_hybrid
from planner.graphs.context import GraphContext

Builder = Callable[[GraphContext], None]

BUILDERS: dict[str, Builder] = {
    "llama": dense.build_llama,
    "mistral3": dense.build_llama,
    "qwen2": dense.build_llama,
    "qwen3": dense.build_llama,
    "qwen2moe": dense.build_llama,
    "qwen3moe": dense.build_llama,
    "olmoe": dense.build_llama,
    "phi3": dense.build_phi3,
    "gpt-oss": gpt_oss.build_gpt_oss,
    "deepseek2": deepseek2.build_deepseek2,
    "mamba": mamba.build_mamba,
    "mamba2": mamba.build_mamba,
    "lfm2": hybrid.build_lfm2,
    "granitehybrid": hybrid.build_granite_hybrid,
    "granite": granite.build_granite,
    "granitemoe": granite.build_granite,
    "jamba": hybrid.build_jamba,
    "rwkv6": rwkv.build_rwkv6,
    "qwen3next": qwen3next.build_qwen3next,
    "rwkv7": rwkv.build_rwkv7,
    "falcon-h1": ssm_hybrid.build_falcon_h1,
    "nemotron_h": ssm_hybrid.build_nemotron_h,
    "nemotron_h_moe": ssm_hybrid.build_nemotron_h,
    "plamo2": ssm_hybrid.build_plamo2,
    "gemma": dense.build_gemma,
    "gemma2": dense.build_gemma2_3,
    "gemma3": dense.build_gemma2_3,
}


def builder_for(architecture: str) -> Builder:
    """The graph builder for an architecture; unknown ones use the llama shape (an estimate)."""
    return BUILDERS.get(architecture, dense.build_llama)
