"""Tiny models of OLMo 2 / Olmo 3 and EXAONE 4 (planner.archs.olmo2): no pre-norms, Q/K norms (per head in
EXAONE 4) and post-norms."""

from __future__ import annotations

from gguf import GGMLQuantizationType as Q

from tests.support.tiny.common import Shapes, TinySpec, attention, gated_ffn, norm, output_norm

global_tensors = output_norm


def layer_tensors(spec: TinySpec, il: int) -> Shapes:
    hk, p = spec.head_k, f"blk.{il}."
    qn, kn = (hk * spec.n_head, hk * spec.n_head_kv) if spec.arch == "olmo2" else (hk, hk)
    qk_norms: Shapes = [(p + "attn_q_norm.weight", (qn,), Q.F32), (p + "attn_k_norm.weight", (kn,), Q.F32)]
    attn = attention(spec, il) + qk_norms + norm(spec, il, "post_attention_norm")
    return attn + gated_ffn(spec, il) + norm(spec, il, "post_ffw_norm")


ZOO: dict[str, TinySpec] = {
    "olmo2": TinySpec("olmo2", n_head_kv=4, weight_type=Q.Q8_0),
    "olmo3": TinySpec("olmo2", n_head_kv=2, n_swa=256, n_layer=8),  # Olmo 3: 3 of 4 layers windowed
    "exaone4": TinySpec("exaone4", n_head_kv=2, weight_type=Q.Q8_0),
    # the 64-layer shape is the one llama.cpp gives windowed layers (3 of 4, RoPE on those only)
    "exaone4-swa": TinySpec("exaone4", n_head_kv=2, n_swa=256, n_layer=64, n_ff=128),
    # variants along the axes real releases differ in
    "olmo3-swa-array": TinySpec(  # convert_hf_to_gguf.py writes Olmo 3's layer types as an explicit array
        "olmo2",
        n_layer=6,
        n_head_kv=4,
        n_swa=1024,
        extra_kv={"olmo2.attention.sliding_window_pattern": [True, True, True, False, True, True]},
        covers=("explicit per-layer window array", "last layer sliding", "MHA", "window 1,024"),
    ),
    "olmo2-mqa": TinySpec("olmo2", n_head_kv=1, covers=("MQA",)),  # OLMo 2 32B: 40 heads over 8
    "exaone4-tied-window-ignored": TinySpec(  # EXAONE 4.0 1.2B: tied; a window key llama.cpp ignores below 64
        "exaone4", n_head_kv=1, n_swa=256, output_type=None, covers=("tied", "window key ignored (not 64 layers)")
    ),
    "exaone4-swa-array": TinySpec(  # 32B: its layer types as an array; here the last layer breaks the period
        "exaone4",
        n_head_kv=4,
        n_swa=128,
        n_layer=64,
        n_ff=128,
        extra_kv={"exaone4.attention.sliding_window_pattern": [True, True, True, False] * 15 + [True] * 3 + [True]},
        covers=("explicit per-layer window array", "last layer sliding", "MHA", "window 128"),
    ),
}
