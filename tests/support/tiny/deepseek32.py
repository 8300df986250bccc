"""Tiny models of DeepSeek V3.2 (planner.archs.deepseek32): DeepSeek V3 with the lightning indexer of its
sparse attention."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, output_norm
from tests.support.tiny.deepseek2 import V3_ROUTING, ffn_block, latent_attention, mla_spec

global_tensors = output_norm


def _indexer(spec: TinySpec, il: int) -> Shapes:
    """The lightning indexer (llama_model_deepseek32::load_arch_tensors)."""
    e, w, p = spec.n_embd, spec.weight_type, f"blk.{il}."
    n_head, head = spec.count("attention.indexer.head_count"), spec.count("attention.indexer.key_length")
    return [
        (p + "indexer.k_norm.weight", (head,), Q.F32),
        (p + "indexer.k_norm.bias", (head,), Q.F32),
        (p + "indexer.proj.weight", (e, n_head), Q.F32),
        (p + "indexer.attn_k.weight", (e, head), w),
        (p + "indexer.attn_q_b.weight", (spec.count("attention.q_lora_rank"), n_head * head), w),
    ]


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    types = spec.extra_kv.get(f"{spec.arch}.attention.indexer.types")
    runs = not isinstance(types, list) or types[il]  # GLM DSA's shared layers have no indexer
    return latent_attention(spec, il) + (_indexer(spec, il) if runs else []) + ffn_block(spec, il)


ZOO: dict[str, TinySpec] = {
    "deepseek32": mla_spec(
        "deepseek32",
        {
            **V3_ROUTING,
            # the lightning indexer: its key cache holds one 64-wide key a token and layer; it keeps
            # the 2,048 best-scored cells, fewer than the cache holds past a 2,048-token context
            "attention.indexer.head_count": 4,
            "attention.indexer.key_length": 64,
            "attention.indexer.top_k": 2048,
        },
        name="tiny-deepseek-v3.2",
    ),
    # GLM 5.2's sparse attention: indexers on the first two layers and every fourth after, the
    # layers between reusing the last top k; sigmoid routing without the header saying so
    "glm-dsa": mla_spec(
        "glm-dsa",
        {
            "expert_weights_norm": True,
            "expert_weights_scale": 2.5,
            "attention.indexer.head_count": 4,
            "attention.indexer.key_length": 64,
            "attention.indexer.top_k": 1024,
            "attention.indexer.types": [1, 1, 1, 0, 0, 0],
        },
        n_layer=6,
    ),
    # no indexer types in the header and a 1M-token training context: llama.cpp's GLM 5.2 pattern; the
    # shared layers' indexer tensors are loaded (optional) and unused
    "glm-dsa-default": mla_spec(
        "glm-dsa",
        {
            "attention.indexer.head_count": 4,
            "attention.indexer.key_length": 64,
            "attention.indexer.top_k": 1024,
        },
        n_layer=7,
        n_ctx_train=1048576,
    ),
    # variants along the axes real releases differ in
    "deepseek32-tied-top-k-512": mla_spec(  # a smaller top k than the context, tied
        "deepseek32",
        {
            **V3_ROUTING,
            "attention.indexer.head_count": 2,
            "attention.indexer.key_length": 64,
            "attention.indexer.top_k": 512,
        },
        output_type=None,
        covers=("indexer top k 512", "2 indexer heads", "tied"),
    ),
}

_INDEXER = {"attention.indexer.head_count": 4, "attention.indexer.key_length": 64}

# one next-token-prediction (MTP) layer after four trunk layers, the globals written first (as some conversions
# order them): llama.cpp skips the layer's tensors but loads its router bias, so the host's mapping reaches over
# the skipped block to it (tests/planner/test_mtp_mapped_span.py, tests/vulkan/test_vulkan_ops.py)
MTP_MODELS: dict[str, TinySpec] = {
    "deepseek32-mtp": mla_spec(
        "deepseek32",
        {**V3_ROUTING, **_INDEXER, "attention.indexer.top_k": 2048, "nextn_predict_layers": 1},
        n_layer=5,
        globals_first=True,
    ),
    "glm-dsa-mtp": mla_spec(
        "glm-dsa",
        {**V3_ROUTING, **_INDEXER, "attention.indexer.top_k": 1024, "nextn_predict_layers": 1},
        n_layer=5,
        globals_first=True,
    ),
}
