"""Tiny models of Gemma 1 to 3 (planner.archs.gemma): sandwich norms from Gemma 2 on, Q/K norms in Gemma 3."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm, qk_norm_attention

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    sandwich = spec.arch in ("gemma2", "gemma3")  # post-norms after attention and FFN
    out = norm(spec, il, "attn_norm")
    out += qk_norm_attention(spec, il) if spec.arch == "gemma3" else attention(spec, il)
    if sandwich:
        out += norm(spec, il, "post_attention_norm")
    out += norm(spec, il, "ffn_norm") + gated_ffn(spec, il)
    return out + norm(spec, il, "post_ffw_norm") if sandwich else out


# Gemma 2's soft caps on the attention and final logits
GEMMA2_CAPS: dict[str, object] = {"gemma2.attn_logit_softcapping": 50.0, "gemma2.final_logit_softcapping": 30.0}

# Gemma 3's layer types as an explicit array (what convert_hf_to_gguf.py writes for a model whose
# layer_types break the period of 6): sliding, sliding, global, sliding, sliding, sliding, global
GEMMA3_SWA_ARRAY = [True, True, False, True, True, True, False]


ZOO: dict[str, TinySpec] = {
    "gemma": TinySpec("gemma", n_head_kv=1, output_type=None, n_vocab=2048),
    "gemma2": TinySpec("gemma2", n_swa=256, output_type=None, n_layer=4, extra_kv=GEMMA2_CAPS),
    "gemma3": TinySpec(
        "gemma3",
        n_layer=6,
        n_swa=512,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        weight_type=Q.Q4_0,
        embd_type=Q.Q8_0,
        n_vocab=4096,
    ),
    # variants along the axes real releases differ in
    "gemma-mha-head-size": TinySpec(  # Gemma 7B: 16 full heads of 256 on a 3,072 embedding
        "gemma", n_head_kv=4, head_dim=64, output_type=None, covers=("MHA", "head size != n_embd / n_head")
    ),
    "gemma2-odd-gqa-1024": TinySpec(  # Gemma 2 2B: 8 heads over 4, 256-wide on 2,304; here 5 layers
        "gemma2",
        n_layer=5,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_swa=1024,
        output_type=None,
        extra_kv=GEMMA2_CAPS,
        covers=("GQA", "head size", "window 1,024", "odd layer count: last layer sliding"),
    ),
    "gemma2-mha-no-caps": TinySpec(
        "gemma2", n_layer=4, n_head_kv=4, n_swa=128, output_type=None, covers=("MHA", "no soft caps", "window 128")
    ),
    "gemma3-8-layers": TinySpec(  # Gemma 3 1B has 26 layers, 4B 34: not multiples of the period of 6
        "gemma3",
        n_layer=8,
        n_swa=512,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        covers=("layers not a multiple of the pattern: last layers sliding", "MQA", "head size", "window 512"),
    ),
    "gemma3-gqa-1024-untied": TinySpec(  # Gemma 3 4B to 27B: GQA, a window of 1,024
        "gemma3",
        n_layer=6,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        n_swa=1024,
        covers=("GQA", "window 1,024", "untied"),
    ),
    "gemma3-swa-array": TinySpec(
        "gemma3",
        n_layer=7,
        n_swa=256,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        extra_kv={"gemma3.attention.sliding_window_pattern": GEMMA3_SWA_ARRAY},
        covers=("explicit per-layer window array", "last layer global", "window 256"),
    ),
    "gemma3-swa-period-3": TinySpec(
        "gemma3",
        n_layer=7,
        n_swa=256,
        swa_pattern=3,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        covers=("window period from the header (3)", "last layer sliding"),
    ),
    "gemma3-fused-qkv": TinySpec(
        "gemma3",
        n_layer=6,
        n_swa=512,
        head_dim=64,
        n_head_kv=1,
        output_type=None,
        optional=("fused_qkv",),
        covers=("fused QKV (--fuse-qkv)",),
    ),
    "gemma3-no-swa": TinySpec(  # sliding_window_pattern 1 in the HF config: no window key at all
        "gemma3", n_layer=4, head_dim=64, n_head_kv=2, output_type=None, covers=("no sliding window", "GQA")
    ),
}
