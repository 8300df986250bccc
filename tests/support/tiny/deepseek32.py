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
    return latent_attention(spec, il) + _indexer(spec, il) + ffn_block(spec, il)


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
