"""Model graphs, one builder per llama.cpp architecture family.

Builders are imported when an architecture first needs one, so that planning a
llama-shaped model does not load the code of every other family.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from planner.graphs.context import GraphContext

Builder = Callable[[GraphContext], None]

# architecture -> (module in planner.graphs, builder function)
BUILDERS: dict[str, tuple[str, str]] = {
    "llama": ("dense", "build_llama"),
    **dict.fromkeys(
        (
            "exaone",
            "smollm3",
            "ernie4_5",
            "minicpm",
            "internlm2",
            "xverse",
            "seed_oss",
            "arcee",
            "orion",
            "starcoder2",
            "stablelm",
        ),
        ("dense", "build_llama"),
    ),
    "mistral3": ("dense", "build_llama"),
    "qwen2": ("dense", "build_llama"),
    "qwen3": ("dense", "build_llama"),
    "qwen2moe": ("dense", "build_llama"),
    "qwen3moe": ("dense", "build_llama"),
    "ernie4_5-moe": ("dense", "build_llama"),
    "glm4moe": ("dense", "build_llama"),
    "minimax-m2": ("dense", "build_llama"),
    "qwen3vl": ("dense", "build_llama"),
    "qwen3vlmoe": ("dense", "build_llama"),
    "olmoe": ("dense", "build_llama"),
    "phi3": ("dense", "build_phi3"),
    "olmo2": ("dense", "build_olmo2"),
    "exaone4": ("dense", "build_olmo2"),
    "cohere2": ("dense", "build_cohere2"),
    "phi2": ("dense", "build_cohere2"),
    "command-r": ("dense", "build_cohere2"),
    "falcon": ("dense", "build_cohere2"),
    "gemma": ("dense", "build_gemma"),
    "gemma2": ("dense", "build_gemma2_3"),
    "gemma3": ("dense", "build_gemma2_3"),
    "gemma3n": ("gemma3n", "build_gemma3n"),
    "gemma4": ("gemma4", "build_gemma4"),
    "gpt-oss": ("gpt_oss", "build_gpt_oss"),
    "llama4": ("llama4", "build_llama4"),
    "deepseek2": ("deepseek2", "build_deepseek2"),
    "mistral4": ("deepseek2", "build_deepseek2"),
    "deepseek32": ("deepseek32", "build_deepseek32"),
    "mamba": ("mamba", "build_mamba"),
    "mamba2": ("mamba", "build_mamba"),
    "lfm2": ("hybrid", "build_lfm2"),
    "lfm2moe": ("hybrid", "build_lfm2"),
    "granitehybrid": ("hybrid", "build_granite_hybrid"),
    "jamba": ("hybrid", "build_jamba"),
    "granite": ("granite", "build_granite"),
    "granitemoe": ("granite", "build_granite"),
    "rwkv6": ("rwkv", "build_rwkv6"),
    "rwkv7": ("rwkv", "build_rwkv7"),
    "qwen3next": ("qwen3next", "build_qwen3next"),
    "qwen35": ("qwen3next", "build_qwen3next"),
    "qwen35moe": ("qwen3next", "build_qwen3next"),
    "falcon-h1": ("ssm_hybrid", "build_falcon_h1"),
    "nemotron_h": ("ssm_hybrid", "build_nemotron_h"),
    "nemotron_h_moe": ("ssm_hybrid", "build_nemotron_h"),
    "plamo2": ("ssm_hybrid", "build_plamo2"),
}


def builder_for(architecture: str) -> Builder:
    """The graph builder for an architecture; unknown ones use the llama shape (an estimate)."""
    module, function = BUILDERS.get(architecture, ("dense", "build_llama"))
    builder: Builder = getattr(import_module(f"planner.graphs.{module}"), function)
    return builder
